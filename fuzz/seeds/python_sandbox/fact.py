def f(n):
    return 1 if n < 2 else n * f(n - 1)
f(5)
