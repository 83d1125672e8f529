import re as _weft_re


class _WeftGlob:
    # `glob` over the sandbox's files (relative to the files directory, or under /tmp).
    def _translate(self, pattern):
        out = ''
        i = 0
        while i < len(pattern):
            c = pattern[i]
            i += 1
            if c == '*':
                out += '[^/]*'
            elif c == '?':
                out += '[^/]'
            elif c == '[':
                j = pattern.find(']', i + 1 if i < len(pattern) and pattern[i] == '!' else i)
                if j < 0:
                    out += '\\['
                else:
                    body = pattern[i:j].replace('\\', '\\\\')
                    if body.startswith('!'):
                        body = '^' + body[1:]
                    out += '[' + body + ']'
                    i = j + 1
            else:
                out += _weft_re.escape(c)
        return out

    def _has_magic(self, part):
        return '*' in part or '?' in part or '[' in part

    def _hidden(self, name, part):
        return name.startswith('.') and not part.startswith('.')

    def _expand(self, base, parts, recursive):
        if not parts:
            return [base]
        part, rest = parts[0], parts[1:]
        join = _weft_os.path.join
        here = base or '.'
        if recursive and part == '**':
            found = self._expand(base, rest, recursive)
            if not _weft_os.path.isdir(here):
                return found
            for name in sorted(_weft_os.listdir(here)):
                child = join(base, name) if base else name
                if name.startswith('.') or not _weft_os.path.isdir(child):
                    continue
                found = found + self._expand(child, parts, recursive)
            return found
        if not self._has_magic(part):
            child = join(base, part) if base else part
            if rest:
                return self._expand(child, rest, recursive) if _weft_os.path.isdir(child) else []
            return [child] if _weft_os.path.exists(child) else []
        if not _weft_os.path.isdir(here):
            return []
        matcher = _weft_re.compile(self._translate(part))
        found = []
        for name in sorted(_weft_os.listdir(here)):
            if self._hidden(name, part) or not matcher.fullmatch(name):
                continue
            child = join(base, name) if base else name
            if rest:
                if _weft_os.path.isdir(child):
                    found = found + self._expand(child, rest, recursive)
            else:
                found.append(child)
        return found

    def glob(self, pathname, recursive=False, root_dir=None):
        pathname = str(pathname)
        base = ''
        if pathname.startswith('/'):
            base = '/'
        parts = [p for p in pathname.split('/') if p != '']
        if base == '/' and parts:
            base, parts = '/' + parts[0], parts[1:]
        return self._expand(base, parts, recursive)

    def iglob(self, pathname, recursive=False):
        return iter(self.glob(pathname, recursive=recursive))

    def escape(self, pathname):
        return _weft_re.sub('([*?[])', '[\\1]', str(pathname))


_weft_glob = _WeftGlob()
