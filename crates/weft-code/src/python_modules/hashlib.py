class _WeftHash:
    def __init__(self, name, data):
        self.name = name
        self.digest_size = _weft_host('hashlib.digest_size', name)
        self.block_size = _weft_host('hashlib.block_size', name)
        self._data = b''
        self.update(data)

    def update(self, data):
        if isinstance(data, str):
            raise TypeError('Strings must be encoded before hashing')
        self._data = self._data + bytes(data)

    def digest(self):
        return _weft_host('hashlib.digest', self.name, self._data)

    def hexdigest(self):
        return self.digest().hex()

    def copy(self):
        other = _WeftHash(self.name, b'')
        other._data = self._data
        return other


class _WeftHashlib:
    algorithms_guaranteed = {'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'blake2b', 'blake2s'}
    algorithms_available = {'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'blake2b', 'blake2s'}

    def new(self, name, data=b'', **options):
        return _WeftHash(name.lower(), data)

    def md5(self, data=b'', **options):
        return _WeftHash('md5', data)

    def sha1(self, data=b'', **options):
        return _WeftHash('sha1', data)

    def sha224(self, data=b'', **options):
        return _WeftHash('sha224', data)

    def sha256(self, data=b'', **options):
        return _WeftHash('sha256', data)

    def sha384(self, data=b'', **options):
        return _WeftHash('sha384', data)

    def sha512(self, data=b'', **options):
        return _WeftHash('sha512', data)

    def blake2b(self, data=b'', **options):
        return _WeftHash('blake2b', data)

    def blake2s(self, data=b'', **options):
        return _WeftHash('blake2s', data)


_weft_hashlib = _WeftHashlib()
