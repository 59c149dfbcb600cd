#!/usr/bin/python
# tunekit: install a set of files rendered on the controller in one module run.
#
# ansible.builtin.template runs two modules on the host per file (a stat, then
# copy or file), each a new Python process that compiles Ansible's module_utils
# again (about 0.26 s of CPU on a small host). A role with dozens of files pays
# that for every file on every run; this module writes them all in one.
# Each file is compared first and written only when its bytes differ (a
# temporary file in the same directory, renamed over the old one), so a run that
# changes nothing writes nothing and reports nothing changed.

from __future__ import annotations

DOCUMENTATION = r"""
module: tunekit_files
short_description: Install files rendered on the controller, in one module run
description:
  - Writes each file of O(files) whose content, mode, owner or group differs on
    the host; a changed file is written to a temporary file in its directory
    and renamed over the old one (never half-written).
  - Reports the paths it changed in C(changed_files) (the dests as given) and,
    with --diff, each file's before and after.
  - Supports check mode (reports what would change, writes nothing).
options:
  files:
    description:
      - The files, each a dict with C(dest), C(content) and C(mode), and
        optionally C(owner) and C(group) (default root).
    type: list
    elements: dict
    required: true
  relocate:
    description:
      - Write each file at its dest's path relative to C(from), under C(to)
        (a scratch copy of a directory). A dest outside C(from) is an error.
    type: dict
  parents:
    description:
      - Create a file's missing parent directories (mode 0755, owned by root).
        Without it a missing directory is an error, except in check mode
        (where an earlier task that would create it did not run).
    type: bool
    default: false
author:
  - tunekit (@tunekit)
"""

EXAMPLES = r"""
- name: Install the kit's nginx files
  tunekit_files:
    files:
      - dest: /etc/nginx/nginx.conf
        content: "{{ lookup('ansible.builtin.template', 'nginx.conf.j2') }}"
        mode: "0644"
    parents: true
"""

RETURN = r"""
changed_files:
  description: The dests (as given) of the files written or whose mode, owner or group changed.
  type: list
  elements: str
  returned: always
created_dirs:
  description: The directories created (with O(parents)).
  type: list
  elements: str
  returned: always
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

FILE_KEYS = {'dest', 'content', 'mode', 'owner', 'group'}


def target_of(module, dest, relocate):
    if not relocate:
        return dest
    base, to = relocate.get('from'), relocate.get('to')
    if not base or not to:
        module.fail_json(msg="tunekit_files: relocate needs both 'from' and 'to'")
    rel = os.path.relpath(dest, base)
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir:
        module.fail_json(msg=f"tunekit_files: {dest} is not under relocate.from ({base})")
    return os.path.join(to, rel)


def missing_dirs(path):
    """The ancestors of path that do not exist, the outermost first."""
    out = []
    d = os.path.dirname(path)
    while d and d != os.sep and not os.path.isdir(d):
        out.append(d)
        d = os.path.dirname(d)
    return list(reversed(out))


def read_bytes(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_atomically(module, path, data, attrs):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f'.{os.path.basename(path)}.', suffix='.tunekit')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        module.set_fs_attributes_if_different(dict(attrs, path=tmp), False)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', required=True),
            relocate=dict(type='dict'),
            parents=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    files, relocate, parents = module.params['files'], module.params['relocate'], module.params['parents']

    # Every file is checked before any is written: bad input writes nothing.
    plan = []
    for i, spec in enumerate(files):
        unknown = set(spec) - FILE_KEYS
        missing = {'dest', 'content', 'mode'} - set(spec)
        if unknown or missing:
            module.fail_json(msg=f"tunekit_files: files[{i}] ({spec.get('dest', 'no dest')}): "
                             + (f"unknown keys {sorted(unknown)}" if unknown else f"missing {sorted(missing)}")
                             + f"; each file takes {sorted(FILE_KEYS)}")
        dest = spec['dest']
        path = target_of(module, dest, relocate)
        # In check mode an earlier task that would have created the directory
        # did not: the file is reported as new, as ansible.builtin.template does.
        if missing_dirs(path) and not parents and not module.check_mode:
            module.fail_json(msg=f"tunekit_files: the directory {os.path.dirname(path)} of {dest} does not exist "
                             "(create it first, or set parents: true)")
        if os.path.lexists(path) and not os.path.isfile(path):
            module.fail_json(msg=f"tunekit_files: {path} exists and is not a regular file; remove it or choose another dest")
        attrs = dict(path=path, mode=str(spec['mode']), owner=spec.get('owner') or 'root', group=spec.get('group') or 'root',
                     secontext=[None, None, None], attributes=None)
        plan.append((dest, path, str(spec['content']).encode('utf-8'), attrs))

    changed_files, created_dirs, diffs = [], [], []
    for dest, path, data, attrs in plan:
        for d in missing_dirs(path) if parents else []:
            if d in created_dirs:
                continue
            created_dirs.append(d)
            if not module.check_mode:
                os.mkdir(d, 0o755)
                os.chmod(d, 0o755)
                os.chown(d, 0, 0)
        before = read_bytes(path)
        if before != data:
            changed_files.append(dest)
            if module._diff:
                diffs.append(dict(before_header=path, after_header=path,
                                  before='' if before is None else before.decode('utf-8', 'replace'),
                                  after=data.decode('utf-8')))
            if not module.check_mode:
                write_atomically(module, path, data, attrs)
        elif module.set_fs_attributes_if_different(attrs, False):
            changed_files.append(dest)

    result = dict(changed=bool(changed_files or created_dirs), changed_files=changed_files, created_dirs=created_dirs)
    if module._diff:
        result['diff'] = diffs
    module.exit_json(**result)


if __name__ == '__main__':
    main()
