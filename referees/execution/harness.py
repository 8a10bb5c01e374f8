"""What runs inside the sandbox for ``run_tests``: the program's side and the tests' side.

Two scripts, each run as ``main.py`` by its own interpreter (see sandbox.py and
sandbox_child.py): ``SERVER`` loads the solution and answers calls; ``TESTER`` runs the
tests, calling the program through a proxy, and writes the verdict. ``CODEC``, which both
embed, is how values cross between them. Plain text, so it imports nothing.
"""

# How a value crosses between the tests and the program: a small tagged binary format of our own
# (a type letter, a length or count, the bytes), read by a decoder that builds only plain values.
# Nothing the program sends can run code in the tests (an object whose __eq__ always says True
# arrives as "cannot be sent"). Not json: importing it (and `re`) cost each process ~20 ms.
# Both runners embed this text.
CODEC = r"""
import os, sys
sys.set_int_max_str_digits(0)
DEEPEST, LARGEST = 200, 16 << 20
_KINDS = ((tuple, b"t"), (frozenset, b"z"), (set, b"S"), (list, b"l"))
_MAKE = {b"t": tuple, b"z": frozenset, b"S": set, b"l": list}


def _sized(tag, payload):
    return tag + str(len(payload)).encode() + b":" + payload


def encode(v, depth=0):
    if depth > DEEPEST:
        raise TypeError(f"values nested more than {DEEPEST} deep")
    if v is None:
        return b"N"
    if v is True or v is False:
        return b"T" if v else b"F"
    if isinstance(v, bool):
        return b"T" if bool(v) else b"F"
    if isinstance(v, int):
        return _sized(b"i", str(int(v)).encode())
    if isinstance(v, float):
        return _sized(b"f", repr(float(v)).encode())
    if isinstance(v, str):
        return _sized(b"s", str(v).encode("utf-8", "surrogatepass"))
    if isinstance(v, (bytes, bytearray)):
        return _sized(b"b", bytes(v))
    if isinstance(v, complex):
        return b"c" + encode(v.real) + encode(v.imag)
    if isinstance(v, dict):
        items = [encode(k, depth + 1) + encode(x, depth + 1) for k, x in v.items()]
        return b"d" + str(len(items)).encode() + b":" + b"".join(items)
    for kind, tag in _KINDS:
        if isinstance(v, kind):
            items = [encode(x, depth + 1) for x in v]
            return tag + str(len(items)).encode() + b":" + b"".join(items)
    raise TypeError(type(v).__name__)


class Unreadable(ValueError):
    pass


def decode(data):
    value, at = _decode(data, 0, 0)
    if at != len(data):
        raise Unreadable("trailing bytes")
    return value


def _number(data, at):
    colon = data.find(b":", at, at + 12)
    if colon < 0 or not data[at:colon].isdigit():
        raise Unreadable("bad length")
    return int(data[at:colon]), colon + 1


def _decode(data, at, depth):
    if depth > DEEPEST or at >= len(data):
        raise Unreadable("too deep, or cut short")
    tag = data[at:at + 1]
    at += 1
    if tag == b"N":
        return None, at
    if tag in (b"T", b"F"):
        return tag == b"T", at
    if tag == b"c":
        real, at = _decode(data, at, depth + 1)
        imag, at = _decode(data, at, depth + 1)
        if type(real) is not float or type(imag) is not float:
            raise Unreadable("bad complex")
        return complex(real, imag), at
    size, at = _number(data, at)
    if tag in b"ifsb" and len(tag) == 1:
        if at + size > len(data):
            raise Unreadable("cut short")
        body, at = data[at:at + size], at + size
        if tag == b"i":
            return int(body.decode("ascii")), at
        if tag == b"f":
            return float(body.decode("ascii")), at
        if tag == b"s":
            return body.decode("utf-8", "surrogatepass"), at
        return bytes(body), at
    if tag == b"d":
        pairs = []
        for _ in range(size):
            key, at = _decode(data, at, depth + 1)
            value, at = _decode(data, at, depth + 1)
            pairs.append((key, value))
        return dict(pairs), at
    if tag in _MAKE:
        items = []
        for _ in range(size):
            item, at = _decode(data, at, depth + 1)
            items.append(item)
        return _MAKE[tag](items), at
    raise Unreadable("unknown type")


def send(fd, kind, payload=b""):
    # A message: its kind (one letter), its size, then the payload.
    data = kind + str(len(payload)).encode() + b":" + payload
    while data:
        data = data[os.write(fd, data):]


def receive(stream):
    # (kind, payload); kind b"" at the end of the pipe. Raises Unreadable on anything malformed.
    kind = stream.read(1)
    if not kind:
        return b"", b""
    digits = b""
    while (c := stream.read(1)) != b":":
        if not c.isdigit() or len(digits) > 10:
            raise Unreadable("not a message" if c else "cut short")
        digits += c
    size = int(digits or b"x")
    if size > LARGEST:
        raise Unreadable(f"over {LARGEST >> 20} MB")
    payload = stream.read(size)
    if len(payload) != size:
        raise Unreadable("cut short")
    return kind, payload


def text(s):
    return str(s).encode("utf-8", "surrogatepass")


def summary(e, filename):
    import traceback
    head = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    where = None
    if isinstance(e, SyntaxError) and e.filename == filename:
        head = f"SyntaxError: {e.msg}"
        where = f"{filename}, line {e.lineno}" + (f": {e.text.strip()}" if e.text and e.text.strip() else "")
    else:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
        if frames:
            where = f"{filename}, line {frames[-1].lineno}" + (f": {frames[-1].line}" if frames[-1].line else "")
    return (f"{head} ({where})" if where else head)[:2000]
"""

# The program's side of run_tests: load the solution, then answer calls until the tests hang up.
# Whatever it sends is only ever the program's answer: the verdict is not its to give.
# The program's name is not "__main__", as in HumanEval's own harness, so a "main" block left
# in a solution does not run (and, say, wait for input).
SERVER = CODEC + r"""
requests = os.fdopen(3, "rb")
namespace = {"__name__": "solution"}
try:
    with open("solution.py", encoding="utf-8") as f:
        exec(compile(f.read(), "solution.py", "exec"), namespace)
except (SystemExit, KeyboardInterrupt) as e:
    send(4, b"L", encode(f"the program exited ({type(e).__name__} {e.args[0] if e.args else None!r}) "
                         "before the tests could call it"))
    sys.exit(1)
except BaseException as e:
    import traceback
    traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    send(4, b"L", encode(summary(e, "solution.py")))
    sys.exit(1)
send(4, b"R", encode([n for n, v in list(namespace.items())
                      if isinstance(n, str) and not n.startswith("__") and callable(v) and not isinstance(v, type)]))
while True:
    kind, payload = receive(requests)
    if kind != b"C":
        break
    try:
        name, args, kwargs = decode(payload)
        value = namespace[name](*args, **dict(kwargs))
    except (SystemExit, KeyboardInterrupt, GeneratorExit) as e:
        send(4, b"Q", encode(f"{type(e).__name__}({', '.join(map(repr, e.args))[:200]})"))
        sys.exit(1)
    except BaseException as e:
        send(4, b"E", encode((type(e).__name__, str(e)[:1000], summary(e, "solution.py"))))
        continue
    try:
        answer = encode(value)
    except (TypeError, ValueError, RecursionError):
        send(4, b"U", encode(type(value).__name__))
    else:
        send(4, b"V", answer)
"""

# The tests' side: it never runs a line of the program. It reads the run's secret and the tests
# (from an anonymous file no path leads to) before the program can reach it, calls the program
# through the pipes, and alone holds the result pipe, where it writes its verdict with the secret.
TESTER = CODEC + r"""
import builtins
if sys.argv[1:] == ["--shared-uid"]:  # the program has our uid: keep it out of our memory and fds
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
given = b""
while chunk := os.read(6, 1 << 16):
    given += chunk
os.close(6)
os.close(7)  # the supervisor may start the program now
secret, _, source = given.partition(b"\n")
secret, source = secret.decode(), source.decode("utf-8", "surrogatepass")
del given
replies = os.fdopen(5, "rb")


def quote_the_tests():
    # Tracebacks quote the tests' lines from here: there is no tests.py on any disk. Only a
    # failure needs it, and linecache (with `re` behind it) costs a process tens of ms to import.
    import linecache
    linecache.cache["tests.py"] = (len(source), None, source.splitlines(True), "tests.py")


class ProgramQuit(BaseException):
    pass  # the program ended, or stopped making sense, mid-tests: no `except Exception` of theirs catches it


class ProgramError(Exception):
    pass  # an exception of a class the program made itself


def answer(when):
    try:
        kind, payload = receive(replies)
    except Unreadable as e:
        raise ProgramQuit(f"the program sent something that is not an answer ({e})") from None
    if not kind:
        raise ProgramQuit(f"the program exited {when}")
    return kind, payload


def value_of(payload):
    try:
        return decode(payload)
    except (ValueError, TypeError, RecursionError) as e:  # Unreadable, bad text, unhashable keys, too deep
        raise ProgramQuit(f"the program sent something that is not an answer ({e})") from None


def rebuilt(name, message, where):
    kind = getattr(builtins, str(name), None)
    error = None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            error = kind(str(message))
        except Exception:
            pass
    if error is None:
        error = ProgramError(f"{str(name)[:100]}: {str(message)[:1000]}")
    error.arena_where = str(where)[:2000]
    return error


def call(name, args, kwargs):
    try:
        request = encode((name, list(args), list(kwargs.items())))
    except TypeError as e:
        raise TypeError(f"the tests passed a {e}, which cannot be sent to the program") from None
    try:
        send(4, b"C", request)
    except BrokenPipeError:
        raise ProgramQuit("the program exited in the middle of the tests") from None
    kind, payload = answer("in the middle of the tests")
    if kind == b"V":
        return value_of(payload)
    if kind == b"E":
        raised = value_of(payload)
        if type(raised) is not tuple or len(raised) != 3:
            raise ProgramQuit("the program sent something that is not an answer")
        raise rebuilt(*raised)
    if kind == b"U":
        raise TypeError(f"{name} returned a {str(value_of(payload))[:100]}, which cannot be sent to the tests "
                        "(plain data only)")
    if kind == b"Q":
        raise ProgramQuit(f"the program raised {str(value_of(payload))[:200]} in the middle of the tests")
    raise ProgramQuit("the program sent something that is not an answer")


def proxy(name):
    def remote(*args, **kwargs):
        return call(name, args, kwargs)
    remote.__name__ = remote.__qualname__ = name
    return remote


def finish(passed, error=""):
    # The verdict: the secret, P or F, and the error's text in hex (so it is one plain line).
    verdict = f"{secret} {'P' if passed else 'F'} {text(error).hex()}".encode()
    while verdict:
        verdict = verdict[os.write(3, verdict):]
    os._exit(0)


try:
    kind, payload = answer("before the tests could call it")
    if kind == b"L":
        finish(False, str(value_of(payload))[:2000])
    names = value_of(payload) if kind == b"R" else None
    if type(names) is not list or not all(type(n) is str for n in names):
        raise ProgramQuit("the program sent something that is not an answer")
    if ENTRY_POINT not in names:
        finish(False, f"NameError: the program defines no {ENTRY_POINT!r}")
    namespace = {"__name__": "tests"}
    exec(compile(source, "tests.py", "exec"), namespace)
    # The tests' own definitions stay theirs; a helper they take from the problem's code (HumanEval's
    # `poly`, `encode_cyclic`) is the program's, so it is called there, like the entry point.
    for name in names:
        namespace.setdefault(name, proxy(name))
    namespace["check"](proxy(ENTRY_POINT))
except ProgramQuit as e:
    finish(False, str(e))
except BaseException as e:
    import traceback
    quote_the_tests()
    traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    # An exception the program raised is told as the program's traceback saw it.
    finish(False, (getattr(e, "arena_where", None) or summary(e, "tests.py"))[:2000])
finish(True)
"""
