"""Files that run later without anyone choosing to run them: writing one is always asked.

The kernel runs with the API key. A file the model may write unasked (in `acceptEdits`, or
with an allow rule) and that some program later runs on its own would run the model's code
outside every sandbox: git runs what `.git/config` names on the runtime's next `git status`,
a restarted kernel imports `ipykernel_launcher.py` from the notebook's folder, IPython runs
its startup folder, a shell its start-up files. So a write to such a file is put to the
person in every mode (`bypassPermissions` too), like a write to a settings file; where
nobody can answer, it is refused.

`runs_later(path, homes)` says why a real path (symlinks followed) is one, or None:

* anything in a git repository's own folder (a `.git` folder or file, any folder laid out as
  a git directory: bare repositories, worktrees' and submodules' git folders), git's own
  configuration in a home folder, and the hooks folders projects point `core.hooksPath` at
  (`.husky`, `.githooks`);
* what Python runs when it starts: `sitecustomize.py`, `usercustomize.py`, any `*.pth`, the
  file `$PYTHONSTARTUP` names, the Python installation the kernel runs (its standard library,
  site-packages and scripts, the user's site-packages); `ipykernel_launcher.py`;
* a module the kernel would import instead of one it has imported: `X.py` or `X/__init__.py`
  where `X` is a top-level name in `sys.modules` (read at the call, in the kernel), unless
  it is that module's own file (the notebook's own module, edited); this package itself
  (`forkagent_jupyter.py`, anything in a `forkagent_jupyter` folder);
* IPython's and Jupyter's folders (`~/.ipython` or `$IPYTHONDIR`, `~/.jupyter` or
  `$JUPYTER_CONFIG_DIR`, Jupyter's data, runtime and search paths: kernel specs are
  commands), any `profile_*/startup` folder, and their configuration files by name
  (`ipython_config.py`, `ipython_kernel_config.py`, `jupyter_*_config.py` / `.json`);
* shell start-up files by name (`.bashrc`, `.profile`, `.zshrc`, ...), those `$BASH_ENV` and
  `$ENV` name, and a few home folders whose files run at login or name commands (`~/.ssh`,
  `~/.config/fish`, `~/.config/autostart`, `~/.config/systemd`); `/etc`;
* a program directly in a folder on `$PATH` (it runs by its name: a `git` there would be the
  runtime's git);
* a file with more than one hard link: writing it changes the file its other names show.
"""

from __future__ import annotations

import itertools
import os
import re
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..tools.files.paths import is_inside, real

__all__ = ["runs_later"]

PACKAGE = "forkagent_jupyter"

_GIT = "git runs the commands its configuration and hooks name"
_STARTUP = "Python runs it whenever it starts"
_IPYTHON = "IPython or Jupyter runs what is here when a kernel or server starts"
_SHELL = "a shell runs it when it starts"
_LOGIN = "programs run what is here at login or when they start"
_INSTALL = "it is part of the Python installation the kernel runs"

_HOOK_FOLDERS = frozenset({".husky", ".githooks"})
_PYTHON_FILES = {
    "sitecustomize.py": _STARTUP,
    "usercustomize.py": _STARTUP,
    "ipykernel_launcher.py": "the kernel starts from it",
}
_SHELL_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".logout",
        ".inputrc",
        ".pythonrc",
        ".pythonrc.py",
        ".xprofile",
        ".xinitrc",
        ".xsession",
        ".xsessionrc",
    }
)
_CONFIG_FILE = re.compile(r"(ipython|ipython_kernel|jupyter(_\w+)?)_config\.(py|json)")
_HOME_FILES = {
    ".gitconfig": _GIT,
    ".config/git": _GIT,
    ".ssh": _LOGIN,
    ".config/fish": _SHELL,
    ".config/autostart": _LOGIN,
    ".config/systemd": _LOGIN,
    ".config/environment.d": _LOGIN,
    ".ipython": _IPYTHON,
    ".config/ipython": _IPYTHON,
    ".jupyter": _IPYTHON,
    ".local/share/jupyter": _IPYTHON,
}


def runs_later(path: Path, homes: Iterable[Path | None] = ()) -> str | None:
    """Why writing the real path `path` would give a program code it runs later on its own
    (a few words), or None. `homes`: the person's home folders (besides `~`)."""
    return next(_reasons(path, homes), None)


def _reasons(path: Path, homes: Iterable[Path | None]) -> Iterator[str]:
    names = [part.casefold() for part in path.parts]
    name = names[-1] if names else ""
    if ".git" in names or _in_git_dir(path):
        yield _GIT
    if _HOOK_FOLDERS.intersection(names[:-1]):
        yield "git runs the hooks in this folder when a project points core.hooksPath at it"
    if name in _PYTHON_FILES:
        yield _PYTHON_FILES[name]
    if name.endswith(".pth"):
        yield _STARTUP
    if name == f"{PACKAGE}.py" or PACKAGE in names[:-1]:
        yield f"it would be imported as {PACKAGE}, which runs in the kernel with the API key"
    shadowed = _shadowed(path)
    if shadowed is not None:
        yield f"the kernel would import it instead of the module {shadowed} it uses"
    if name in _SHELL_FILES:
        yield _SHELL
    if _CONFIG_FILE.fullmatch(name) or _in_profile_startup(names):
        yield _IPYTHON
    for folder, why in _folders(homes):
        if is_inside(folder, path):
            yield why
    for folder in _path_folders():
        if path.parent == folder:
            yield f"it is a program in {folder}, a folder on PATH: it runs by its name"
    links = _links(path)
    if links > 1:
        yield f"it has {links} hard links: writing it changes the file its other names show"


def _in_git_dir(path: Path) -> bool:
    """Whether a folder above `path` is laid out as a git directory (HEAD, and objects and
    refs or a commondir file): a bare repository, or a `.git` reached through a symlink."""
    for folder in path.parents:
        try:
            if (folder / "HEAD").is_file() and (
                ((folder / "objects").is_dir() and (folder / "refs").is_dir())
                or (folder / "commondir").is_file()
            ):
                return True
        except OSError:
            continue
    return False


def _in_profile_startup(names: list[str]) -> bool:
    pairs = itertools.pairwise(names[:-1])  # the folders above the file
    return any(a.startswith("profile_") and b == "startup" for a, b in pairs)


def _shadowed(path: Path) -> str | None:
    """The top-level module the kernel has imported that `path` would be found in place of
    (`X.py`, `X/__init__.py`), unless `path` is that module's own file."""
    if path.name == "__init__.py":
        top = path.parent.name
    elif path.suffix == ".py":
        top = path.stem
    else:
        return None
    if not top.isidentifier() or top == "__main__":
        return None
    module = sys.modules.get(top)
    if module is None:
        return None
    origin = getattr(module, "__file__", None)
    if isinstance(origin, str) and real(origin) == path:
        return None
    return top


def _links(path: Path) -> int:
    try:
        found = os.lstat(path)
    except OSError:
        return 0
    return found.st_nlink if stat.S_ISREG(found.st_mode) else 0


def _folders(homes: Iterable[Path | None]) -> Iterator[tuple[Path, str]]:
    """Folders (or files) whose whole content runs later, with why; read at each call (the
    environment and the loaded modules may change)."""
    named: list[tuple[str | None, str]] = [
        (os.environ.get("IPYTHONDIR"), _IPYTHON),
        (os.environ.get("JUPYTER_CONFIG_DIR"), _IPYTHON),
        (os.environ.get("JUPYTER_DATA_DIR"), _IPYTHON),
        (os.environ.get("JUPYTER_RUNTIME_DIR"), _IPYTHON),
        (os.environ.get("PYTHONSTARTUP"), _STARTUP),
        (os.environ.get("BASH_ENV"), _SHELL),
        (os.environ.get("ENV"), _SHELL),
        (os.environ.get("GIT_CONFIG_GLOBAL"), _GIT),
        ("/etc", "it is the system's configuration"),
    ]
    for variable in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH"):
        named += [(p, _IPYTHON) for p in os.environ.get(variable, "").split(os.pathsep)]
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        named.append((str(Path(xdg, "jupyter")), _IPYTHON))
    named += [(p, _IPYTHON) for p in _jupyter_folders()]
    named += [(p, _INSTALL) for p in _python_folders()]
    home_folders = {real(h) for h in [*homes, _home()] if h is not None}
    for home in home_folders:
        named += [(str(home / rel), why) for rel, why in _HOME_FILES.items()]
    for where, why in named:
        if where and Path(where).expanduser().is_absolute():
            folder = real(where)
            if folder != Path(folder.anchor) and folder not in home_folders:
                yield folder, why


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no HOME and no entry in the password database
        return None


def _jupyter_folders() -> list[str]:
    """IPython's and Jupyter's folders as the kernel's own modules name them (only when they
    are loaded: the runtime imports no Jupyter). Not IPython's `get_ipython_dir`, which
    makes the folder when it is missing."""
    out: list[object] = []
    getter = getattr(sys.modules.get("IPython.core.getipython"), "get_ipython", None)
    shell = _quiet(getter) if callable(getter) else None
    profile = getattr(getattr(shell, "profile_dir", None), "location", None)
    if isinstance(profile, str):  # the running kernel's profile (and the IPython folder)
        out.append(profile)
        if Path(profile).name.startswith("profile_"):
            out.append(str(Path(profile).parent))
    paths = sys.modules.get("jupyter_core.paths")
    for name in ("jupyter_config_dir", "jupyter_data_dir", "jupyter_runtime_dir"):
        function = getattr(paths, name, None)
        if callable(function):
            out.append(_quiet(function))
    for name in ("jupyter_path", "jupyter_config_path"):
        function = getattr(paths, name, None)
        found = _quiet(function) if callable(function) else None
        if isinstance(found, list):
            out += [p for p in found if isinstance(p, str)]
    return [p for p in out if isinstance(p, str)]


def _quiet(function: object) -> object:
    try:
        return function()  # type: ignore[operator]
    except Exception:
        return None


def _python_folders() -> list[str]:
    """The kernel's Python installation: standard library, site-packages, scripts, the
    user's site-packages."""
    out: list[str] = []
    paths = sysconfig.get_paths()
    out += [
        paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib", "scripts") if k in paths
    ]
    try:
        out += site.getsitepackages()
    except AttributeError:  # an old virtualenv's site module
        pass
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if isinstance(user_site, str):
        out.append(user_site)
    return out


def _path_folders() -> list[Path]:
    """The absolute folders on $PATH (a relative entry names whatever folder a shell is in)."""
    entries = os.environ.get("PATH", "").split(os.pathsep)
    return [real(e) for e in entries if e and Path(e).is_absolute()]
