class _WeftYaml:
    # PyYAML's safe subset: plain data in, plain data out (parsed by the host's YAML
    # reader; no Python-specific tags, no object construction). monty has no class
    # inheritance, so yaml.YAMLError is ValueError.
    YAMLError = ValueError

    def _text(self, stream):
        if isinstance(stream, str):
            return stream
        if isinstance(stream, bytes):
            return stream.decode('utf-8')
        return stream.read()

    def safe_load(self, stream):
        answer = _weft_host('yaml.load', self._text(stream))
        if answer[0]:
            return answer[1]
        raise ValueError('yaml: ' + answer[1])

    def load(self, stream, Loader=None):
        return self.safe_load(stream)

    def safe_dump(self, data, stream=None, **options):
        answer = _weft_host('yaml.dump', data)
        if not answer[0]:
            raise ValueError('yaml: ' + answer[1])
        if stream is None:
            return answer[1]
        stream.write(answer[1])

    def dump(self, data, stream=None, Dumper=None, **options):
        return self.safe_dump(data, stream)


_weft_yaml = _WeftYaml()
