"""Fork safety: what a worker inherits from a kernel that has already computed.

A worker process is a copy-on-write fork of the kernel, and a fork copies one thread: the
threads of every pool the kernel's libraries started are gone in the copy while the pools'
state says they are there. A call that hands work to such a pool waits for ever. So:

* in the kernel, right before the snapshot fork, `survey()` looks at what cannot be made safe
  in the copy: Python threads of the user's running at the fork (a lock such a thread held
  stays locked in the copy, and nothing there will release it) and modules another thread was
  importing (their import lock stays held); the snapshot adds the kernel's thread pools known
  not to survive a fork (polars' pool; read from /proc off the kernel's loop). Each becomes
  one line on the worker's card (what, why, `--shared`).
* in the snapshot process, right after the fork, `settle()` makes safe what can be:
  OpenMP (libgomp: scikit-learn's estimators) and BLAS builds other than OpenBLAS on
  pthreads run one thread in a worker (their pools are not fork-safe; OpenBLAS's is),
  joblib's reusable loky executor is forgotten (the worker starts its own), the kernel's
  `concurrent.futures` thread pools start their threads afresh on their next submit (work the
  kernel had queued stays the kernel's), a `multiprocessing` pool of the kernel (its handler
  threads and processes are the kernel's) refuses work in one line instead of waiting for
  ever, and a module another thread was importing is dropped so that importing it starts
  afresh.
* in each worker, `watch()` starts a watchdog when the survey found a hazard: a worker whose
  code waits, with none of its threads using CPU, on a lock held at the fork gets an error
  naming it instead of waiting for ever; one stalled in a pool that cannot be rescued ends
  with `HAZARD_EXIT` (its card already says why). The worker's own threads (its output
  flusher, the watchdog) are not counted: they use a little CPU all the time, more on a busy
  machine, and counting them hid every stall once that crossed a clock tick per
  `STALL_SECONDS`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import sys
import sysconfig
import threading
import time
import types
import weakref
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HAZARD_EXIT", "Hazard", "InheritedPoolError", "Survey", "settle", "survey", "watch"]

HAZARD_EXIT = 71
"""A worker's exit code when it stalled on state it inherited from the kernel at the fork."""
STALL_SECONDS = 3.0
"""How long a worker waits, using no CPU, on a hazard before the watchdog acts."""
WATCH_INTERVAL = 0.5
_FUTEX = {"x86_64": 202, "aarch64": 98}
_LIBRARY_ROOTS = tuple(
    {p for key in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_path(key))}
)
_OWN_ROOT = str(Path(__file__).resolve().parents[3])  # forkagent_jupyter/
_THREADING = os.sep + "threading.py"
_UNSAFE_POOLS = {"polars-": "polars"}
"""OS thread name prefixes of pools that do not survive a fork, and whose pool it is."""
_UNSAFE_THREADS = {"IO loop": ("distributed", "a dask Client's event loop")}
"""Python thread names of libraries' event loops that do not survive a fork (a dask Client's
loop: its calls in a copy wait for ever on a thread that is not there)."""


@dataclass
class Hazard:
    """One thing a worker inherits that may make it wait for ever: `line` is for its card."""

    line: str
    locks: list[object] = field(default_factory=list)  # locks a thread held at the fork
    module: str | None = None  # a module another thread was importing
    pool: str | None = None  # a library whose thread pool cannot survive the fork


@dataclass
class Survey:
    hazards: list[Hazard] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return [h.line for h in self.hazards]


_current = Survey()  # in a snapshot and its workers: the survey taken at its fork


# -- in the kernel, before the fork -----------------------------------------------------------


def survey() -> Survey:
    """What of the kernel's state at this moment a worker forked now cannot use (cheap: the
    threads' stacks and the OS threads' names; nothing in the namespace is touched)."""
    found = Survey()
    with contextlib.suppress(Exception):
        _survey_threads(found)
    return found


def _is_user_code(filename: str) -> bool:
    if filename.startswith("<") or not filename:
        return False
    path = str(Path(filename).absolute())
    return not path.startswith(_LIBRARY_ROOTS) and not path.startswith(_OWN_ROOT + os.sep)


def _importing(frame: types.FrameType | None) -> str | None:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_find_and_load" and "importlib._bootstrap" in code.co_filename:
            name = frame.f_locals.get("name")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def _held_locks(frame: types.FrameType | None) -> list[tuple[str, object]]:
    """Locks a thread's user frames reference that are held now (by it, most likely)."""
    held: list[tuple[str, object]] = []
    seen: set[int] = set()
    while frame is not None:
        if _is_user_code(frame.f_code.co_filename):
            for name, value in _referenced(frame):
                if id(value) not in seen and _is_held(value):
                    seen.add(id(value))
                    held.append((name, value))
        frame = frame.f_back
    return held


def _referenced(frame: types.FrameType) -> list[tuple[str, object]]:
    """The objects a frame names: its locals, the globals its code uses, and one attribute
    level of its locals (`self.lock`)."""
    found: list[tuple[str, object]] = []
    local_items = list(frame.f_locals.items())
    found.extend(local_items)
    for name in frame.f_code.co_names:
        if name in frame.f_globals:
            found.append((name, frame.f_globals[name]))
    for owner, value in local_items:
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and not isinstance(value, types.ModuleType):
            found.extend((f"{owner}.{k}", v) for k, v in list(attrs.items())[:50])
    return found


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _inner_lock(value: object) -> object:
    if isinstance(value, _LOCK_TYPES):
        return value
    if isinstance(value, threading.Condition):
        return value._lock  # type: ignore[attr-defined]
    if isinstance(value, threading.Semaphore):
        return value._cond._lock  # type: ignore[attr-defined]
    return None


def _is_held(value: object) -> bool:
    lock = _inner_lock(value)
    if lock is None:
        return False
    locked = getattr(lock, "locked", None)
    if callable(locked):
        return bool(locked())
    return repr(lock).startswith("<locked")  # an RLock before 3.14 has no locked()


def _where(frame: types.FrameType | None) -> str:
    """The innermost user frame of a stack: 'hold, line 4'."""
    while frame is not None:
        if _is_user_code(frame.f_code.co_filename):
            return f"{frame.f_code.co_name}, line {frame.f_lineno}"
        frame = frame.f_back
    return "library code"


def _survey_threads(found: Survey) -> None:
    me = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        name = names.get(ident, f"thread {ident}")
        module = _importing(frame)
        if module is not None:
            found.hazards.append(
                Hazard(
                    f"At the fork, thread {name!r} was importing {module!r}: this worker "
                    "imports it afresh (if its import had effects half done, use --shared).",
                    module=module,
                )
            )
            continue
        stack: list[types.FrameType] = []
        walk: types.FrameType | None = frame
        while walk is not None:
            stack.append(walk)
            walk = walk.f_back
        outer = [f for f in stack if not f.f_code.co_filename.endswith(_THREADING)]
        if not outer or not _is_user_code(outer[-1].f_code.co_filename):
            library, what = _UNSAFE_THREADS.get(name, ("", ""))
            if library in sys.modules and not any(h.pool == library for h in found.hazards):
                found.hazards.append(_pool_hazard(library, what))
            continue  # a thread the user did not start: the kernel's, libraries' pools
        locks = _held_locks(frame)
        if locks:
            held = ", ".join(repr(n) for n, _ in locks[:3])
            line = (
                f"At the fork, thread {name!r} held {held} ({_where(frame)}): that thread is "
                "not in this worker, so code here that takes it would wait for ever (it gets "
                "an error instead); --shared runs the worker in the kernel."
            )
        else:
            line = (
                f"At the fork, thread {name!r} was running ({_where(frame)}): a lock it held "
                "stays held in this worker; if a call here waits on one, use --shared."
            )
        found.hazards.append(Hazard(line, locks=[lock for _, lock in locks]))


def _thread_names(pid: int) -> list[str]:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            names.append((task / "comm").read_text().strip())
    return names


def _survey_pools(found: Survey) -> None:
    """Run in the snapshot: the kernel's OS threads (a pool, once started, stays)."""
    kernel = os.getppid()
    if not Path(f"/proc/{kernel}/task").is_dir():
        return
    names = _thread_names(kernel)
    for prefix, library in _UNSAFE_POOLS.items():
        if library in sys.modules and any(n.startswith(prefix) for n in names):
            found.hazards.append(_pool_hazard(library))


def _pool_hazard(library: str, what: str = "") -> Hazard:
    what = what or f"{library}'s thread pool"
    return Hazard(
        f"At the fork, {what} was running in the kernel: its threads are not "
        f"in this worker, so {library} calls here cannot finish (the worker ends instead); "
        "--shared runs the worker in the kernel.",
        pool=library,
    )


# -- in the snapshot, after the fork ----------------------------------------------------------


def settle(found: Survey) -> None:
    """Run once in the snapshot process right after the fork (see the module doc)."""
    global _current
    _current = found
    steps: list[Callable[[], None]] = [
        lambda: _survey_pools(found),
        _limit_native_pools,
        _forget_loky,
        _restart_thread_pools,
        _refuse_kernel_process_pools,
        lambda: _drop_half_imported(found),
    ]
    for step in steps:
        with contextlib.suppress(Exception):
            step()


def _limit_native_pools() -> None:
    """OpenMP (and BLAS other than OpenBLAS on pthreads) to one thread: their pools' threads
    are not in this process. Cheap when none is loaded."""
    if not any(m in sys.modules for m in ("numpy", "sklearn", "scipy", "torch", "lightgbm")):
        return
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        _limit_openmp_by_hand()
        return
    controller = ThreadpoolController()
    for pool in controller.lib_controllers:
        fork_safe = pool.internal_api == "openblas" and (
            getattr(pool, "threading_layer", "") == "pthreads"
        )
        if pool.user_api == "openmp" or not fork_safe:
            with contextlib.suppress(Exception):
                pool.set_num_threads(1)


def _limit_openmp_by_hand() -> None:
    """Without threadpoolctl: omp_set_num_threads(1) in every OpenMP runtime loaded."""
    with open("/proc/self/maps") as maps:
        paths = {
            line.split()[-1]
            for line in maps
            if any(k in line for k in ("libgomp", "libomp", "libiomp")) and "/" in line
        }
    for path in paths:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(path).omp_set_num_threads(1)


def _forget_loky() -> None:
    """joblib's reusable loky executor of the kernel: its management thread is not here."""
    for name in ("joblib.externals.loky.reusable_executor", "loky.reusable_executor"):
        module = sys.modules.get(name)
        if module is not None:
            setattr(module, "_executor", None)  # noqa: B010
            setattr(module, "_executor_kwargs", None)  # noqa: B010


def _restart_thread_pools() -> None:
    """The kernel's `concurrent.futures.ThreadPoolExecutor`s (found through their threads):
    those threads are not here, and a pool that believes it has them never starts others, so
    a submit here would wait for ever. Each pool forgets them and gets its own empty queue;
    its next submit starts threads in this process."""
    module = sys.modules.get("concurrent.futures.thread")
    if module is None:
        return
    from concurrent.futures.thread import ThreadPoolExecutor  # loaded: `module` is it

    threads: MutableMapping[threading.Thread, object] = getattr(module, "_threads_queues", {})
    pools: dict[int, ThreadPoolExecutor] = {}
    for thread in list(threads):
        args = getattr(thread, "_args", ())
        ref = args[0] if args else None
        pool = ref() if isinstance(ref, weakref.ref) else None
        if isinstance(pool, ThreadPoolExecutor):
            pools[id(pool)] = pool
    threads.clear()
    for pool in pools.values():
        pool._threads = set()
        pool._idle_semaphore = threading.Semaphore(0)
        pool._shutdown_lock = threading.Lock()
        pool._work_queue = queue.SimpleQueue()


class InheritedPoolError(RuntimeError):
    """A worker's code used a `multiprocessing` pool the kernel made before the fork."""


_KERNEL_POOL = (
    "this {kind} was made in the kernel before the fork: its threads{procs} are the kernel's, "
    "not this worker's, so it cannot run work here. Make the pool in the worker's code, or "
    "use --shared."
)


def _refuse_kernel_process_pools() -> None:
    """A `multiprocessing` pool (or ThreadPool) of the kernel: its task and result handler
    threads are not here (and its processes serve the kernel), so its map would wait for ever.
    Pools made here are marked; any other refuses work with InheritedPoolError."""
    module: Any = sys.modules.get("multiprocessing.pool")  # its private methods are replaced
    if module is None:
        return  # no pool was made in the kernel
    pool_class = module.Pool
    made = pool_class.__init__
    check = pool_class._check_running

    def init_marked(self: Any, *args: object, **kwargs: object) -> None:
        self._forkagent_own = True
        made(self, *args, **kwargs)

    def check_running(self: object) -> None:
        check(self)
        if not getattr(self, "_forkagent_own", False):
            thread_pool = isinstance(self, module.ThreadPool)
            raise InheritedPoolError(
                _KERNEL_POOL.format(
                    kind=type(self).__name__, procs="" if thread_pool else " and processes"
                )
            )

    pool_class.__init__ = init_marked
    pool_class._check_running = check_running


def _drop_half_imported(found: Survey) -> None:
    import importlib._bootstrap as bootstrap

    locks: dict[str, object] = getattr(bootstrap, "_module_locks", {})
    for hazard in found.hazards:
        if hazard.module is None:
            continue
        module = sys.modules.get(hazard.module)
        spec = getattr(module, "__spec__", None)
        if module is not None and getattr(spec, "_initializing", False):
            del sys.modules[hazard.module]
        locks.pop(hazard.module, None)


# -- in a worker --------------------------------------------------------------------------------


def watch(say: Callable[[str], None], own: Sequence[threading.Thread] = ()) -> None:
    """In a worker: put the survey's lines on its card and, if it found a lock or a pool
    that cannot be rescued, watch for a stall on it (see the module doc). `own`: the
    worker's own threads, started already, whose CPU use is no sign of progress."""
    found = _current
    for line in found.lines:
        say(line)
    if not any(h.locks or h.pool for h in found.hazards):
        return
    signal.signal(signal.SIGUSR2, _on_stall)
    skip = {t.native_id for t in own if t.native_id is not None}
    watchdog = threading.Thread(target=_watchdog, args=(found, skip), name="forkagent-watchdog")
    watchdog.daemon = True
    watchdog.start()


class InheritedLockError(RuntimeError):
    """The worker's code waited on a lock held, at the fork, by a thread it does not have."""


def _on_stall(_signum: int, frame: types.FrameType | None) -> None:
    """SIGUSR2 from the watchdog, in the main thread: if the code waits on a lock a thread
    held at the fork, raise (a lock acquire is interrupted by signals); else carry on."""
    orphans = {id(lock): lock for h in _current.hazards for lock in h.locks}
    walk = frame
    while walk is not None:
        for name, value in _referenced(walk):
            lock = _inner_lock(value)
            if lock is not None and id(lock) in orphans and _is_held(lock):
                raise InheritedLockError(
                    f"{name!r} was held by another thread of the kernel when this worker was "
                    "forked; that thread is not here, so the lock is never released. Run this "
                    "with --shared, or make the lock in the worker."
                )
        walk = walk.f_back


def _cpu_ticks(skip: set[int]) -> int:
    """CPU clock ticks used so far by this process's threads but those in `skip` (a thread
    that has ended counts no more: its end is progress enough to start the count again)."""
    ticks = 0
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) in skip:
            continue
        with contextlib.suppress(OSError):
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks


def _main_waits_on_futex() -> bool:
    tid = os.getpid()  # the main thread of a forked process
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/self/task/{tid}/syscall") as call:
            number = int(call.read().split()[0])
        return number == _FUTEX.get(os.uname().machine, -1)
    with contextlib.suppress(OSError):
        return "futex" in Path(f"/proc/self/task/{tid}/wchan").read_text()
    return False


def _watchdog(found: Survey, skip: set[int]) -> None:
    stalled_since: float | None = None
    signalled = False
    last = -1
    main = threading.main_thread().ident
    pools = [h.pool for h in found.hazards if h.pool]
    skip = skip | {threading.get_native_id()}
    while True:
        time.sleep(WATCH_INTERVAL)
        try:
            ticks = _cpu_ticks(skip)
            waiting = _main_waits_on_futex()
        except (OSError, ValueError, IndexError):
            return
        if not waiting:
            last, stalled_since, signalled = ticks, None, False
            continue
        if ticks != last:  # CPU used (the signal's own handler, say): the stall starts again
            last, stalled_since = ticks, None
            continue
        now = time.monotonic()
        stalled_since = stalled_since or now
        if now - stalled_since < STALL_SECONDS:
            continue
        if not signalled:
            signalled = True
            os.kill(os.getpid(), signal.SIGUSR2)  # a Python-level wait raises
            continue
        frame = sys._current_frames().get(main) if main is not None else None
        if pools and _in_library(frame, pools):
            os._exit(HAZARD_EXIT)


def _in_library(frame: types.FrameType | None, libraries: list[str]) -> bool:
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(f"{os.sep}{library}{os.sep}" in filename for library in libraries):
            return True
        frame = frame.f_back
    return False
