class _WeftRandom:
    # Python's `random`, on splitmix64 drawn by the host. Unseeded, it starts from fresh
    # entropy; `seed(x)` makes the draws a function of x (not CPython's sequence).
    def __init__(self):
        self._state = _weft_host('random.entropy')

    def seed(self, a=None):
        if a is None:
            self._state = _weft_host('random.entropy')
        else:
            self._state = _weft_host('random.seed', repr(a))

    def _below(self, n):
        drawn = _weft_host('random.below', self._state, n)
        self._state = drawn[0]
        return drawn[1]

    def random(self):
        return self._below(9007199254740992) / 9007199254740992.0

    def uniform(self, a, b):
        return a + (b - a) * self.random()

    def randrange(self, start, stop=None, step=1):
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError('zero step for randrange()')
        if step > 0:
            n = (stop - start + step - 1) // step
        else:
            n = (stop - start + step + 1) // step
        if n <= 0:
            raise ValueError('empty range for randrange()')
        return start + step * self._below(n)

    def randint(self, a, b):
        return self.randrange(a, b + 1)

    def choice(self, seq):
        if len(seq) == 0:
            raise IndexError('Cannot choose from an empty sequence')
        return seq[self._below(len(seq))]

    def choices(self, population, weights=None, k=1):
        if weights is None:
            return [self.choice(population) for _ in range(k)]
        total = sum(weights)
        picked = []
        for _ in range(k):
            r = self.random() * total
            i = 0
            while i < len(population) - 1 and r >= weights[i]:
                r -= weights[i]
                i += 1
            picked.append(population[i])
        return picked

    def shuffle(self, x):
        i = len(x) - 1
        while i > 0:
            j = self._below(i + 1)
            swapped = x[i]
            x[i] = x[j]
            x[j] = swapped
            i -= 1

    def sample(self, population, k):
        pool = list(population)
        if k < 0 or k > len(pool):
            raise ValueError('Sample larger than population or is negative')
        picked = []
        for _ in range(k):
            picked.append(pool.pop(self._below(len(pool))))
        return picked


_weft_random = _WeftRandom()
