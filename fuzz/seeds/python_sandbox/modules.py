import hashlib, time
from urllib.parse import quote, urlparse, urljoin
h = hashlib.sha256(b"x").hexdigest()
u = urlparse("http://a/b?c=1#d")
[h, quote("a b"), u.netloc, urljoin("http://a/b/c", "../d"), time.time() > 0]
