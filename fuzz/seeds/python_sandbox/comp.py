y = [i * x for i in items]
{"y": y, "n": len(y)}
