class _WeftTemporaryDirectory:
    def __init__(self, suffix=None, prefix=None, dir=None):
        self.name = _weft_tempfile.mkdtemp(suffix, prefix, dir)

    def __enter__(self):
        return self.name

    def __exit__(self, *exc):
        self.cleanup()

    def cleanup(self):
        for top, dirs, files in reversed(_weft_os.walk(self.name)):
            for name in files:
                _weft_os.remove(_weft_os.path.join(top, name))
            _weft_os.rmdir(top)


class _WeftTempfile:
    # `tempfile` confined to the run's private /tmp (the engine removes it with the
    # run's sandbox): names are drawn from fresh entropy.
    tempdir = '/tmp'

    def gettempdir(self):
        return '/tmp'

    def gettempprefix(self):
        return 'tmp'

    def _name(self, suffix, prefix, dir):
        letters = 'abcdefghijklmnopqrstuvwxyz0123456789_'
        state = _weft_host('random.entropy')
        tail = ''
        for _ in range(8):
            drawn = _weft_host('random.below', state, len(letters))
            state = drawn[0]
            tail += letters[drawn[1]]
        return _weft_os.path.join(dir or '/tmp', (prefix or 'tmp') + tail + (suffix or ''))

    def mktemp(self, suffix='', prefix='tmp', dir=None):
        return self._name(suffix, prefix, dir)

    def mkdtemp(self, suffix=None, prefix=None, dir=None):
        name = self._name(suffix, prefix, dir)
        _weft_os.mkdir(name)
        return name

    def TemporaryDirectory(self, suffix=None, prefix=None, dir=None):
        return _WeftTemporaryDirectory(suffix, prefix, dir)


_weft_tempfile = _WeftTempfile()
