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


_weft_time = _WeftTime()
