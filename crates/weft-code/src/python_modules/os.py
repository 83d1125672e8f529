import os as _weft_real_os


class _WeftOsPath:
    # `os.path` for POSIX paths. Paths are the sandbox's own: relative to the files
    # directory, or under /tmp; what touches a file goes through pathlib to the engine.
    sep = '/'
    curdir = '.'
    pardir = '..'

    def join(self, a, *parts):
        path = str(a)
        for part in parts:
            part = str(part)
            if part.startswith('/'):
                path = part
            elif path == '' or path.endswith('/'):
                path = path + part
            else:
                path = path + '/' + part
        return path

    def split(self, p):
        p = str(p)
        i = p.rfind('/') + 1
        head, tail = p[:i], p[i:]
        if head and head != '/' * len(head):
            head = head.rstrip('/')
        return (head, tail)

    def basename(self, p):
        return self.split(p)[1]

    def dirname(self, p):
        return self.split(p)[0]

    def splitext(self, p):
        p = str(p)
        base = self.basename(p)
        dot = base.rfind('.')
        if dot <= 0 or base[:dot] == '.' * dot:
            return (p, '')
        cut = len(p) - len(base) + dot
        return (p[:cut], p[cut:])

    def isabs(self, p):
        return str(p).startswith('/')

    def normpath(self, p):
        p = str(p)
        if p == '':
            return '.'
        absolute = p.startswith('/')
        parts = []
        for part in p.split('/'):
            if part == '' or part == '.':
                continue
            if part == '..' and parts and parts[-1] != '..':
                parts.pop()
            elif part == '..' and absolute:
                continue
            else:
                parts.append(part)
        joined = '/'.join(parts)
        if absolute:
            return '/' + joined
        return joined or '.'

    def abspath(self, p):
        # The sandbox has no working directory outside its files: a relative path
        # stays relative to the files directory.
        return self.normpath(p)

    def realpath(self, p):
        return self.normpath(p)

    def relpath(self, p, start='.'):
        p, start = self.normpath(p), self.normpath(start)
        if start == '.':
            return p
        if p == start:
            return '.'
        if p.startswith(start + '/'):
            return p[len(start) + 1:]
        raise ValueError('relpath: ' + p + ' is not under ' + start)

    def expanduser(self, p):
        return str(p)

    def expandvars(self, p):
        return str(p)

    def _test(self, p, test):
        # As CPython's: a path that cannot be looked at (refused, say) is not there.
        try:
            return test(_weft_Path(str(p)))
        except OSError:
            return False

    def exists(self, p):
        return self._test(p, lambda path: path.exists())

    def lexists(self, p):
        return self._test(p, lambda path: path.exists())

    def isfile(self, p):
        return self._test(p, lambda path: path.is_file())

    def isdir(self, p):
        return self._test(p, lambda path: path.is_dir())

    def islink(self, p):
        return self._test(p, lambda path: path.is_symlink())

    def getsize(self, p):
        return _weft_real_os.stat(str(p)).st_size

    def getmtime(self, p):
        return _weft_real_os.stat(str(p)).st_mtime


class _WeftOs:
    # `os` as monty provides it (files through the engine, an empty environment), with
    # `os.path`, `os.walk` and `os.getcwd` added.
    sep = '/'
    curdir = '.'
    pardir = '..'
    extsep = '.'
    linesep = '\n'
    name = 'posix'

    def __init__(self):
        self.path = _WeftOsPath()
        self.environ = {}

    def getenv(self, key, default=None):
        return default

    def getcwd(self):
        return '.'

    def listdir(self, path='.'):
        return _weft_real_os.listdir(path)

    def stat(self, path):
        return _weft_real_os.stat(path)

    def mkdir(self, path, mode=511):
        _weft_real_os.mkdir(path)

    def makedirs(self, path, mode=511, exist_ok=False):
        _weft_real_os.makedirs(path, exist_ok=exist_ok)

    def remove(self, path):
        _weft_real_os.remove(path)

    def unlink(self, path):
        _weft_real_os.unlink(path)

    def rmdir(self, path):
        _weft_real_os.rmdir(path)

    def rename(self, src, dst):
        _weft_real_os.rename(src, dst)

    def replace(self, src, dst):
        _weft_real_os.replace(src, dst)

    def fspath(self, path):
        return _weft_real_os.fspath(path)

    def walk(self, top):
        # Eager, top-down: a list of (dirpath, dirnames, filenames).
        found = []
        pending = [str(top)]
        while pending:
            here = pending.pop(0)
            dirs = []
            files = []
            for name in sorted(_weft_real_os.listdir(here)):
                if self.path.isdir(self.path.join(here, name)):
                    dirs.append(name)
                else:
                    files.append(name)
            found.append((here, dirs, files))
            pending = [self.path.join(here, d) for d in dirs] + pending
        return found


from pathlib import Path as _weft_Path
_weft_os = _WeftOs()
