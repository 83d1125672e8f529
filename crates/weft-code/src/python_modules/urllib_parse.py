class _WeftUrllibParse:
    uses_netloc = ['', 'ftp', 'http', 'gopher', 'nntp', 'telnet', 'imap', 'wais', 'file',
                   'mms', 'https', 'shttp', 'snews', 'prospero', 'rtsp', 'rtsps', 'rtspu',
                   'rsync', 'svn', 'svn+ssh', 'sftp', 'nfs', 'git', 'git+ssh', 'ws', 'wss']
    uses_relative = ['', 'ftp', 'http', 'gopher', 'nntp', 'imap', 'wais', 'file', 'https',
                     'shttp', 'mms', 'prospero', 'rtsp', 'rtsps', 'rtspu', 'sftp', 'svn',
                     'svn+ssh', 'ws', 'wss']

    def quote(self, string, safe='/', encoding=None, errors=None):
        return _weft_host('urllib.parse.quote', string, safe, False)

    def quote_plus(self, string, safe='', encoding=None, errors=None):
        return _weft_host('urllib.parse.quote', string, safe, True)

    def unquote(self, string, encoding='utf-8', errors='replace'):
        return _weft_host('urllib.parse.unquote', string, False)

    def unquote_plus(self, string, encoding='utf-8', errors='replace'):
        return _weft_host('urllib.parse.unquote', string, True)

    def urlsplit(self, url, scheme='', allow_fragments=True):
        return _weft_host('urllib.parse.urlsplit', url, scheme, allow_fragments)

    def urlparse(self, url, scheme='', allow_fragments=True):
        return _weft_host('urllib.parse.urlparse', url, scheme, allow_fragments)

    def urlunsplit(self, components):
        scheme, netloc, url, query, fragment = components
        if netloc or (scheme and scheme in self.uses_netloc and url[:2] != '//'):
            if url and url[:1] != '/':
                url = '/' + url
            url = '//' + (netloc or '') + url
        if scheme:
            url = scheme + ':' + url
        if query:
            url = url + '?' + query
        if fragment:
            url = url + '#' + fragment
        return url

    def urlunparse(self, components):
        scheme, netloc, url, params, query, fragment = components
        if params:
            url = url + ';' + params
        return self.urlunsplit((scheme, netloc, url, query, fragment))

    def urljoin(self, base, url, allow_fragments=True):
        if not base:
            return url
        if not url:
            return base
        bscheme, bnetloc, bpath, bparams, bquery, bfragment = self.urlparse(base, '', allow_fragments)
        scheme, netloc, path, params, query, fragment = self.urlparse(url, bscheme, allow_fragments)
        if scheme != bscheme or scheme not in self.uses_relative:
            return url
        if scheme in self.uses_netloc:
            if netloc:
                return self.urlunparse((scheme, netloc, path, params, query, fragment))
            netloc = bnetloc
        if not path and not params:
            path = bpath
            params = bparams
            if not query:
                query = bquery
            return self.urlunparse((scheme, netloc, path, params, query, fragment))
        base_parts = bpath.split('/')
        if base_parts[-1] != '':
            base_parts.pop()
        if path[:1] == '/':
            segments = path.split('/')
        else:
            segments = base_parts + path.split('/')
            segments = segments[:1] + [s for s in segments[1:-1] if s] + segments[-1:]
        resolved = []
        for seg in segments:
            if seg == '..':
                if resolved:
                    resolved.pop()
            elif seg != '.':
                resolved.append(seg)
        if segments[-1] in ('.', '..'):
            resolved.append('')
        return self.urlunparse((scheme, netloc, '/'.join(resolved) or '/', params, query, fragment))

    def _quote_value(self, value, safe):
        if isinstance(value, bytes):
            return self.quote_plus(value, safe)
        return self.quote_plus(str(value), safe)

    def urlencode(self, query, doseq=False, safe='', encoding=None, errors=None, quote_via=None):
        if isinstance(query, dict):
            query = list(query.items())
        pieces = []
        for k, v in query:
            k = self._quote_value(k, safe)
            if doseq and not isinstance(v, (str, bytes)) and isinstance(v, (list, tuple, set)):
                for item in v:
                    pieces.append(k + '=' + self._quote_value(item, safe))
            else:
                pieces.append(k + '=' + self._quote_value(v, safe))
        return '&'.join(pieces)

    def parse_qsl(self, qs, keep_blank_values=False, strict_parsing=False, encoding='utf-8',
                  errors='replace', max_num_fields=None, separator='&'):
        pairs = []
        if not qs:
            return pairs
        fields = qs.split(separator)
        if max_num_fields is not None and len(fields) > max_num_fields:
            raise ValueError('Max number of fields exceeded')
        for field in fields:
            if not field and not strict_parsing:
                continue
            nv = field.split('=', 1)
            if len(nv) != 2:
                if strict_parsing:
                    raise ValueError('bad query field: ' + repr(field))
                if keep_blank_values:
                    nv.append('')
                else:
                    continue
            if len(nv[1]) or keep_blank_values:
                pairs.append((self.unquote_plus(nv[0]), self.unquote_plus(nv[1])))
        return pairs

    def parse_qs(self, qs, keep_blank_values=False, strict_parsing=False, encoding='utf-8',
                 errors='replace', max_num_fields=None, separator='&'):
        parsed = {}
        for name, value in self.parse_qsl(qs, keep_blank_values, strict_parsing, encoding,
                                          errors, max_num_fields, separator):
            if name in parsed:
                parsed[name].append(value)
            else:
                parsed[name] = [value]
        return parsed


class _WeftUrllib:
    def __init__(self):
        self.parse = _WeftUrllibParse()


_weft_urllib = _WeftUrllib()
