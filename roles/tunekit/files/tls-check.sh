#!/bin/sh
# The certificate and key the HTTPS front will use, checked on the host before
# anything changes (roles/tunekit/tasks/tls-preflight.yml). Prints one line per
# problem, naming the variable, the file and the fix; prints nothing when both
# are usable. Always exits 0: the play's assert decides.
#
#   tls-check.sh CERT KEY WEBROOT NAME...
#
# NAME: the site's server_name values; "_", "" and regular expressions (~...)
# match no certificate name and are skipped.
set -u
cert=$1 key=$2 webroot=$3
shift 3
fix_issue="issue it first (certbot certonly --standalone -d NAME while port 80 is free; renewals: --webroot -w $webroot) or point the variable at the file"

missing=0
for pair in "tunekit_nginx_tls_certificate=$cert" "tunekit_nginx_tls_certificate_key=$key"; do
  var=${pair%%=*} file=${pair#*=}
  if [ ! -e "$file" ]; then
    echo "$var=$file: no such file on this host; $fix_issue"
    missing=1
  elif [ ! -f "$file" ]; then
    echo "$var=$file: not a regular file; point the variable at the PEM file"
    missing=1
  elif [ ! -r "$file" ]; then
    echo "$var=$file: not readable by $(id -un); fix its permissions (nginx's master reads it as root)"
    missing=1
  fi
done
[ "$missing" = 1 ] && exit 0

# The key: never readable by every user.
mode=$(stat -L -c %a "$key")
case $mode in
  *[4567]) echo "tunekit_nginx_tls_certificate_key=$key: readable by every user (mode $mode); chmod 600 $key" ;;
esac

if ! openssl x509 -in "$cert" -noout >/dev/null 2>&1; then
  echo "tunekit_nginx_tls_certificate=$cert: not a PEM certificate; point the variable at fullchain.pem"
  exit 0
fi
if ! keypub=$(openssl pkey -in "$key" -pubout 2>/dev/null); then
  echo "tunekit_nginx_tls_certificate_key=$key: not a PEM private key (or it is encrypted: nginx cannot ask for a passphrase); point the variable at privkey.pem"
  exit 0
fi
if [ "$(openssl x509 -in "$cert" -noout -pubkey)" != "$keypub" ]; then
  echo "tunekit_nginx_tls_certificate_key=$key does not match tunekit_nginx_tls_certificate=$cert (another key's certificate); give the key the certificate was issued for"
fi
if ! openssl x509 -in "$cert" -noout -checkend 0 >/dev/null; then
  echo "tunekit_nginx_tls_certificate=$cert expired ($(openssl x509 -in "$cert" -noout -enddate)); renew it (certbot renew) before deploying"
fi
for name in "$@"; do
  case $name in ''|_|~*) continue ;; esac
  if ! openssl x509 -in "$cert" -noout -checkhost "$name" | grep -q 'does match'; then
    echo "tunekit_nginx_tls_certificate=$cert does not cover $name (tunekit_nginx_server_name); issue one that names it (certbot -d $name)"
  fi
done
exit 0
