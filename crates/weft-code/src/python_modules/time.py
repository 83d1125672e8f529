class _WeftTime:
    def time(self):
        return _weft_host('time.time')

    def time_ns(self):
        return _weft_host('time.time_ns')

    def monotonic(self):
        return _weft_host('time.monotonic')

    def monotonic_ns(self):
        return _weft_host('time.monotonic_ns')

    def perf_counter(self):
        return _weft_host('time.monotonic')

    def perf_counter_ns(self):
        return _weft_host('time.monotonic_ns')

    def sleep(self, secs):
        _weft_host('time.sleep', secs)

    def strftime(self, format, t=None):
        # Of now only (the sandbox's local time is UTC); a struct_time is not supported.
        if t is not None:
            raise NotImplementedError('time.strftime formats the current time only')
        return _weft_host('time.strftime', format)


_weft_time = _WeftTime()
