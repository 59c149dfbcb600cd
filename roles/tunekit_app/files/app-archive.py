# The app's folder on the controller as one gzip'd tar archive, so that it
# reaches a host in one transfer (tasks/source.yml unpacks it there with
# ansible.builtin.unarchive), less the names tunekit_app_source_exclude lists
# (node_modules, which npm ci builds on the host, and .git by default).
#
#   python3 app-archive.py SRC_DIR DEST.tar.gz [--exclude NAME]... [--only PATH]...
#
# --only: the paths under SRC_DIR (files or folders, whole) to pack, and their
# parent folders, instead of all of it: the part of the kit the metrics role
# ships (roles/tunekit_metrics/vars/main.yml tunekit_metrics_kit_paths).
#
# Runs on the controller with the Python that runs Ansible: standard library
# only. Every entry gets the same date (1980-01-01, the earliest a zip file can
# hold, as reproducible builds use), owner root and the modes u=rwX,go=rX, so
# the archive depends on the app's names and contents alone: unarchive's
# comparison (tar --diff on the host) then finds nothing to do when the code is
# the same, even from a fresh clone whose files all have new dates.
# A pattern (fnmatch: * ? [...]) matches a file's or a folder's name at any
# depth; a folder matched is left out whole.
"""Pack an app folder into a tar.gz archive, leaving out the excluded names."""

import argparse
import fnmatch
import gzip
import os
import stat
import sys
import tarfile

MTIME = 315532800  # 1980-01-01T00:00:00Z


def excluded(name, patterns):
    """Whether a file or folder name matches one of the patterns."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def selected(rel, only):
    """Whether a relative path is one of the --only paths, under one, or a parent folder of one."""
    if not only:
        return True
    return any(rel == p or rel.startswith(p + '/') or p.startswith(rel + '/') for p in only)


def entries(root, patterns, only=()):
    """The paths under root (relative, sorted, parents first) that are shipped."""
    only = [os.path.normpath(p) for p in only]
    out = []
    for folder, dirs, files in os.walk(root):
        # Pruned in place: os.walk never descends into an excluded folder.
        rel = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs if not excluded(d, patterns) and selected(joined(rel, d), only))
        for name in dirs + sorted(f for f in files if not excluded(f, patterns) and selected(joined(rel, f), only)):
            out.append(joined(rel, name))
    return out


def joined(rel, name):
    """A name in the folder rel (relative to the root; '.' the root itself)."""
    return name if rel == '.' else os.path.join(rel, name)


def normalised(info):
    """The entry as every run writes it: fixed date and owner, modes u=rwX,go=rX."""
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = 'root'
    if info.isdir() or info.mode & 0o111:
        info.mode = 0o755
    else:
        info.mode = 0o644
    return info


def pack(src, dest, patterns, only=()):
    """Write the archive; returns how many entries it holds."""
    names = entries(src, patterns, only)
    count = 0
    with open(dest, 'wb') as raw:
        with gzip.GzipFile(filename='', mode='wb', fileobj=raw, mtime=0) as zipped:
            with tarfile.open(fileobj=zipped, mode='w', format=tarfile.GNU_FORMAT) as tar:
                for rel in names:
                    full = os.path.join(src, rel)
                    mode = os.lstat(full).st_mode
                    # Sockets, pipes and devices are no part of an app's code.
                    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                        continue
                    info = normalised(tar.gettarinfo(full, arcname=rel))
                    if info.isreg():
                        with open(full, 'rb') as data:
                            tar.addfile(info, data)
                    else:
                        tar.addfile(info)
                    count += 1
    return count


def main():
    """Command line: SRC DEST [--exclude NAME]... [--only PATH]..., one line on stderr and exit 2 when SRC cannot be packed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('src')
    parser.add_argument('dest')
    parser.add_argument('--exclude', action='append', default=[])
    parser.add_argument('--only', action='append', default=[])
    args = parser.parse_args()
    if not os.path.isdir(args.src):
        sys.stderr.write('tunekit_app_source=%s is not a folder on the controller: give the folder of the app '
                         '(or a git URL, or a tarball)\n' % args.src)
        return 2
    missing = [p for p in args.only if not os.path.exists(os.path.join(args.src, p))]
    if missing:
        sys.stderr.write('%s: no %s to pack (--only): the kit checkout is incomplete; run npm ci in it\n'
                         % (args.src, ', '.join(missing)))
        return 2
    count = pack(args.src, args.dest, args.exclude, args.only)
    if count == 0:
        os.unlink(args.dest)
        sys.stderr.write('tunekit_app_source=%s has no files once %s are left out (tunekit_app_source_exclude): '
                         'point it at the folder that holds the app\n' % (args.src, ', '.join(args.exclude)))
        return 2
    sys.stdout.write('%d entries\n' % count)
    return 0


if __name__ == '__main__':
    sys.exit(main())
