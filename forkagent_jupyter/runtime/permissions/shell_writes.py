"""Which files a shell command writes: what its programs' options and operands name.

An allowed `Bash(git log:*)` must not be a way to write `.claude/settings.local.json`
(`git log --output=...`): a call that writes a file is decided like a Write of that file as
well (`matching`). The redirections' targets come from `shell_syntax`; this module knows the
programs. `WRITERS` is the one table of them, program -> what it writes:

- a file (`Written(path)`): `sort -o`, `shuf -o`, `tee FILE`, `dd of=`, `truncate`,
  `uniq IN OUT`, `xxd IN OUT`, `find -fprint/-fprint0/-fprintf/-fls`, `git --output` (log,
  diff, show, ...), `git archive -o`, `git bundle create`, `git config -f`,
  `curl -o/-D/-c/--trace...` and `curl -O` (the URL's name), `wget -O/-o/-a` (and the URL's
  name), `tar -f` when creating and `tar -g`, `sed -i` (its operands) and the files of its `w`
  commands, `patch -o/-r` (or the file it names), `time/strace/ltrace -o`, `script FILE`,
  `openssl -out`, `gzip`/`gunzip` and the like (the file, and its name without the suffix);
- a copy's destination (`Written(dest, sources=...)`): `cp`, `mv` (its sources too: they
  go), `install`, `ln`: the file, or `dest/NAME` for each source where `dest` is a folder (or
  `-t`), a whole tree where a source is a folder;
- a folder it writes names of its own choosing into (`into=True`): extracting (`tar -x -C`,
  `unzip -d`), `patch` (the files its input names), `git clone`/`init`/`worktree add`/
  `apply`, `git format-patch -o`, `rsync`/`scp` destinations, `curl -J`, `wget -r -P`, and
  `split`/`csplit` (only names starting with the prefix: `names`).

`unread` says why a program writes files its words do not name (`curl -K` reads its options
from a file, `sed -f` its script, `wget -e` runs a setting). Options are read as GNU getopt
reads them: anywhere on the line unless the program stops at its first operand, in clusters
(`-ro out`), and abbreviated (`--out` for `--output`) where the program takes that.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .shell_git import expand_aliases, read_git
from .shell_syntax import ACTIVE, Word

__all__ = ["WRITERS", "Writes", "Written", "writes"]


@dataclass(frozen=True)
class Written:
    """One thing a command writes: `path` as written, relative to `base` (the folders the
    program moves to first, in order: `git -C`, `tar -C`, `patch -d`). `into`: names of the
    program's choosing below `path` (True), `path` itself (False), or a whole tree where
    `path` is a folder (None: what `mv dir elsewhere` takes away); `names`: only top-level
    names matching this glob. `sources`: `path` is a copy's destination, a folder when
    `to_folder`, or when it is one and not `no_folder`. `redirect`: a redirection's target,
    not one of the command's words."""

    path: Word
    into: bool | None = False
    names: str | None = None
    sources: tuple[Word, ...] = ()
    to_folder: bool = False
    no_folder: bool = False
    base: tuple[Word, ...] = ()
    redirect: bool = False


@dataclass
class Writes:
    """What one command writes (`found`), and why it may write files its words do not name
    (`unread`)."""

    found: list[Written] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)


_Writer = Callable[[list[Word]], Writes]
_Options = list[tuple[str, "Word | None"]]

# -- words -------------------------------------------------------------------------------------


def _key_length(word: Word, n: int) -> int:
    """How much of `word.key` its first `n` characters take."""
    k = count = 0
    while count < n and k < len(word.key):
        k += 2 if word.key[k] == ACTIVE else 1
        count += 1
    return k


def _tail(word: Word, n: int) -> Word:
    """`word` without its first `n` characters (its key cut at the same place)."""
    key = word.key[_key_length(word, n) :]
    return Word(word.text[n:], key, word.dynamic and (ACTIVE + "$" in key or ACTIVE + "`" in key))


def _head(word: Word, n: int) -> Word:
    """The first `n` characters of `word`."""
    return Word(word.text[:n], word.key[: _key_length(word, n)], word.dynamic)


def _plain(text: str) -> Word:
    return Word.plain(text)


def _folder_of(word: Word) -> Word:
    """The folder a path word names a file in (`a/b` -> `a`, `b` -> `.`)."""
    head = posixpath.dirname(word.text)
    return _head(word, len(head)) if head else _plain(".")


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _name_glob(word: Word, suffix: str = "") -> str:
    """`dir/part_` -> `part_*` (+ `suffix`): the names a prefix stands for."""
    return _glob_escape(posixpath.basename(word.text)) + "*" + _glob_escape(suffix)


_QUIET = frozenset({"-", "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
"""Targets that are no file (`-`: standard output, for the programs here)."""


def _files(words: Iterable[Word], base: tuple[Word, ...] = ()) -> list[Written]:
    return [Written(w, base=base) for w in words if w.text not in _QUIET]


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Grammar:
    """A program's options: the short letters that take a value (`values`: the rest of the
    cluster, or the next word), those whose value is optional and attached (`optional`), the
    long options that take a value, its other long options (`longs`, so that an abbreviation
    is read as the option it stands for), whether it takes abbreviations, and whether its
    options end at its first operand (`permute=False`)."""

    values: str = ""
    long_values: frozenset[str] = frozenset()
    longs: frozenset[str] = frozenset()
    optional: str = ""
    abbreviations: bool = True
    permute: bool = True

    def long(self, name: str, prefer: frozenset[str]) -> str:
        """The long option `name` stands for (an unambiguous abbreviation: the option)."""
        known = self.long_values | self.longs
        if name in known or not self.abbreviations or len(name) < 4:
            return name
        hits = sorted(k for k in known if k.startswith(name))
        return next((k for k in hits if k in prefer), hits[0] if hits else name)


def _getopt(
    args: list[Word], grammar: _Grammar, prefer: frozenset[str] = frozenset()
) -> tuple[_Options, list[Word]]:
    """The options (canonical name, value) and the operands of `args`; `prefer`: what an
    ambiguous abbreviation is read as (the writing options: it would fail to run anyway)."""
    options: _Options = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        word = args[i]
        text = word.text
        if text == "--":
            operands.extend(args[i + 1 :])
            break
        if text.startswith("--"):
            raw, eq, _ = text.partition("=")
            name = grammar.long(raw, prefer)
            if eq:
                options.append((name, _tail(word, len(raw) + 1)))
            elif name in grammar.long_values and i + 1 < len(args):
                i += 1
                options.append((name, args[i]))
            else:
                options.append((name, None))
        elif text.startswith("-") and len(text) > 1:
            i += _cluster(word, args[i + 1 : i + 2], grammar, options)
        else:
            operands.append(word)
            if not grammar.permute:
                operands.extend(args[i + 1 :])
                break
        i += 1
    return options, operands


def _cluster(word: Word, following: list[Word], grammar: _Grammar, options: _Options) -> int:
    """Read `-abc` into `options`; how many following words its last letter took (0 or 1)."""
    text = word.text
    for k in range(1, len(text)):
        letter = "-" + text[k]
        if text[k] in grammar.values:
            if k + 1 < len(text):
                options.append((letter, _tail(word, k + 1)))
                return 0
            if following:
                options.append((letter, following[0]))
                return 1
            options.append((letter, None))
            return 0
        if text[k] in grammar.optional:
            options.append((letter, _tail(word, k + 1) if k + 1 < len(text) else None))
            return 0
        options.append((letter, None))
    return 0


def _values(options: _Options, names: Iterable[str]) -> list[Word]:
    wanted = set(names)
    return [v for name, v in options if name in wanted and v is not None]


def _has(options: _Options, names: Iterable[str]) -> bool:
    wanted = set(names)
    return any(name in wanted for name, _ in options)


def _option_values(args: list[Word], names: tuple[str, ...]) -> list[Word]:
    """The values of the options `names` wherever they stand (`-o X`, `-oX`, `--opt X`,
    `--opt=X`), read loosely: for git, whose subcommands each read their own options."""
    out: list[Word] = []
    for k, word in enumerate(args):
        text = word.text
        for name in names:
            if text == name and k + 1 < len(args):
                out.append(args[k + 1])
            elif name.startswith("--") and text.startswith(name + "="):
                out.append(_tail(word, len(name) + 1))
            elif not name.startswith("--") and text.startswith(name) and len(text) > len(name):
                out.append(_tail(word, len(name)))
    return out


# -- programs read by their options and operands ---------------------------------------------


def _option_writer(
    grammar: _Grammar,
    files: Iterable[str] = (),
    operands: Callable[[list[Word]], list[Written]] | None = None,
) -> _Writer:
    """A program whose `files` options name files it writes, and whose written operands
    `operands` picks."""
    file_options = frozenset(files)

    def writer(args: list[Word]) -> Writes:
        options, found = _getopt(args, grammar, file_options)
        out = Writes(_files(_values(options, file_options)))
        if operands is not None:
            out.found += operands(found)
        return out

    return writer


def _all(operands: list[Word]) -> list[Written]:
    return _files(operands)


def _second(operands: list[Word]) -> list[Written]:
    return _files(operands[1:2])


def _first_or_typescript(operands: list[Word]) -> list[Written]:
    return _files(operands[:1] or [_plain("typescript")])


_SORT = _Grammar("kStTo", frozenset({
    "--key", "--field-separator", "--buffer-size", "--temporary-directory", "--parallel",
    "--batch-size", "--files0-from", "--compress-program", "--random-source", "--sort",
    "--output",
}))  # fmt: skip
_SHUF = _Grammar("ino", frozenset({"--input-range", "--head-count", "--output", "--random-source"}))
_TEE = _Grammar(longs=frozenset({"--append", "--ignore-interrupts", "--output-error"}))
_TRUNCATE = _Grammar("rs", frozenset({"--reference", "--size"}))
_UNIQ = _Grammar("fsw", frozenset({"--skip-fields", "--skip-chars", "--check-chars"}))
_XXD = _Grammar("cglson", permute=False, abbreviations=False)
_TIME = _Grammar("fo", frozenset({"--format", "--output"}), permute=False)
_STRACE = _Grammar("eopsuEaIOSPb", permute=False, abbreviations=False)
_LTRACE = _Grammar("eopsuaDnAFl", permute=False, abbreviations=False)
_SCRIPT = _Grammar("cEmoOIBT", frozenset({
    "--command", "--echo", "--logging-format", "--output-limit", "--log-out", "--log-in",
    "--log-io", "--log-timing",
}))  # fmt: skip


def _dd(args: list[Word]) -> Writes:
    return Writes(_files(_tail(a, 3) for a in args if a.text.startswith("of=")))


_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fls", "-fprintf"})


def _find(args: list[Word]) -> Writes:
    return Writes(_files(args[k + 1] for k, w in enumerate(args[:-1]) if w.text in _FIND_WRITES))


def _openssl(args: list[Word]) -> Writes:
    return Writes(
        _files(args[k + 1] for k, w in enumerate(args[:-1]) if w.text in ("-out", "-keyout"))
    )


# -- copies ------------------------------------------------------------------------------------

_COPIES: dict[str, _Grammar] = {
    "cp": _Grammar("St", frozenset({"--suffix", "--target-directory", "--no-preserve"})),
    "mv": _Grammar("St", frozenset({"--suffix", "--target-directory"})),
    "install": _Grammar("gmoSt", frozenset({
        "--group", "--mode", "--owner", "--suffix", "--target-directory", "--strip-program",
    })),
    "ln": _Grammar("St", frozenset({"--suffix", "--target-directory"})),
}  # fmt: skip


def _copy(program: str) -> _Writer:
    grammar = _COPIES[program]
    prefer = frozenset({"--target-directory"})

    def writer(args: list[Word]) -> Writes:
        options, operands = _getopt(args, grammar, prefer)
        if program == "install" and _has(options, ("-d", "--directory")):
            return Writes(_files(operands))
        folder = _values(options, ("-t", "--target-directory"))
        if folder:
            dest, sources = folder[-1], tuple(operands)
        elif len(operands) >= 2:
            dest, sources = operands[-1], tuple(operands[:-1])
        elif program == "ln" and operands:
            dest, sources = _plain("."), tuple(operands)
        else:
            return Writes()
        copy = Written(
            dest,
            sources=sources,
            to_folder=bool(folder) or len(sources) > 1,
            no_folder=_has(options, ("-T", "--no-target-directory")),
        )
        out = Writes([copy])
        if program == "mv":  # what moves away is gone from where it was
            out.found += [Written(s, into=None) for s in sources]
        return out

    return writer


def _remote(text: str) -> bool:
    return "://" in text or re.match(r"^[^/]*:", text) is not None


def _transfer(grammar: _Grammar, files: Iterable[str] = (), folders: Iterable[str] = ()) -> _Writer:
    """rsync, scp: the last operand, where it is local, gets the copies (a tree)."""
    file_options, folder_options = tuple(files), tuple(folders)

    def writer(args: list[Word]) -> Writes:
        options, operands = _getopt(args, grammar, frozenset(file_options))
        out = Writes(_files(_values(options, file_options)))
        out.found += [Written(w, into=True) for w in _values(options, folder_options)]
        if len(operands) >= 2 and not _remote(operands[-1].text):
            out.found.append(Written(operands[-1], into=True))
        return out

    return writer


_RSYNC = _Grammar("efBMT@", frozenset({
    "--rsh", "--rsync-path", "--filter", "--exclude", "--include", "--exclude-from",
    "--include-from", "--files-from", "--block-size", "--port", "--password-file", "--log-file",
    "--log-file-format", "--temp-dir", "--partial-dir", "--backup-dir", "--suffix",
    "--compare-dest", "--copy-dest", "--link-dest", "--chmod", "--chown", "--timeout",
    "--contimeout", "--bwlimit", "--remote-option", "--max-size", "--min-size", "--max-delete",
    "--modify-window", "--iconv", "--out-format", "--info", "--debug", "--stop-at",
    "--stop-after", "--usermap", "--groupmap", "--outbuf", "--checksum-choice",
    "--compress-choice", "--compress-level", "--skip-compress", "--sockopts", "--protocol",
    "--address", "--only-write-batch", "--write-batch", "--read-batch", "--early-input",
    "--checksum-seed", "--log-format",
}))  # fmt: skip
_SCP = _Grammar("cFiJloPSDX", abbreviations=False)

# -- downloads ---------------------------------------------------------------------------------

_CURL = _Grammar("AbcCdDeEFHKmoPQrtTuUwxXYyz", frozenset({
    "--output", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr",
    "--libcurl", "--etag-save", "--hsts", "--alt-svc", "--output-dir", "--config", "--url",
    "--data", "--data-binary", "--data-raw", "--data-urlencode", "--header", "--user",
    "--user-agent", "--referer", "--request", "--form", "--cookie", "--upload-file", "--proxy",
    "--max-time", "--connect-timeout", "--write-out", "--cert", "--key", "--cacert", "--range",
    "--retry", "--resolve", "--json",
}), abbreviations=False)  # fmt: skip
_CURL_FILES = (
    "-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
    "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc",
)  # fmt: skip


def _curl(args: list[Word]) -> Writes:
    options, operands = _getopt(args, _CURL)
    out = Writes()
    if _has(options, ("-K", "--config")):
        out.unread.append("curl -K reads its options (and the files they write) from a file")
    folders = _values(options, ("--output-dir",))
    base = tuple(folders[-1:])
    here = folders[-1] if folders else _plain(".")
    for word in _values(options, _CURL_FILES):
        if re.search(r"#\d", word.text):  # `-o 'x_#1'`: named after the URL's globs
            out.found.append(Written(_folder_of(word), into=True, base=base))
        elif word.text not in _QUIET:
            out.found.append(Written(word, base=base))
    if _has(options, ("-J", "--remote-header-name")):
        out.found.append(Written(here, into=True))
    elif _has(options, ("-O", "--remote-name", "--remote-name-all")):
        urls = [w for w in [*operands, *_values(options, ("--url",))] if "://" in w.text]
        for url in urls:
            name = posixpath.basename(urlsplit(url.text).path)
            if url.dynamic or not name or "{" in url.text or "[" in url.text:
                out.found.append(Written(here, into=True))
            else:
                out.found.append(Written(_plain(name), base=base))
    return out


_WGET = _Grammar("OoaPeiBQtTwUlARDIXn", frozenset({
    "--output-document", "--output-file", "--append-output", "--directory-prefix", "--execute",
    "--input-file", "--base", "--quota", "--tries", "--timeout", "--wait", "--user-agent",
    "--level", "--accept", "--reject", "--domains", "--include-directories",
    "--exclude-directories", "--header", "--user", "--password", "--post-data", "--post-file",
    "--load-cookies", "--save-cookies", "--warc-file", "--rejected-log", "--config",
    "--referer", "--method", "--body-data", "--body-file", "--default-page", "--cut-dirs",
    "--limit-rate",
}), longs=frozenset({
    "--recursive", "--mirror", "--page-requisites", "--force-directories",
    "--content-disposition", "--trust-server-names", "--no-directories",
}))  # fmt: skip
_WGET_TREE = (
    "-r", "--recursive", "-m", "--mirror", "-p", "--page-requisites", "-x",
    "--force-directories", "--content-disposition", "--trust-server-names", "-i",
    "--input-file",
)  # fmt: skip
_WGET_FILES = (
    "-O", "--output-document", "-o", "--output-file", "-a", "--append-output",
    "--save-cookies", "--rejected-log",
)  # fmt: skip


def _wget(args: list[Word]) -> Writes:
    options, operands = _getopt(args, _WGET, frozenset(_WGET_FILES))
    out = Writes(_files(_values(options, _WGET_FILES)))
    if _has(options, ("-e", "--execute", "--config")):
        out.unread.append("wget -e runs a setting that may name the files it writes")
    for prefix in _values(options, ("--warc-file",)):
        out.found.append(Written(_folder_of(prefix), into=True, names=_name_glob(prefix)))
    if _has(options, ("-O", "--output-document")):
        return out
    folders = _values(options, ("-P", "--directory-prefix"))
    here = folders[-1] if folders else _plain(".")
    if _has(options, _WGET_TREE):
        out.found.append(Written(here, into=True))
        return out
    for url in operands:
        path = urlsplit(url.text if "://" in url.text else "//" + url.text).path
        if url.dynamic:
            out.found.append(Written(here, into=True))
        else:
            out.found.append(
                Written(_plain(posixpath.basename(path) or "index.html"), base=(here,))
            )
    return out


# -- sed ---------------------------------------------------------------------------------------

_SED = _Grammar("efl", frozenset({"--expression", "--file", "--line-length"}), longs=frozenset({
    "--in-place", "--quiet", "--silent", "--regexp-extended", "--separate", "--null-data",
    "--unbuffered", "--posix", "--debug", "--sandbox", "--follow-symlinks", "--zero-terminated",
}), optional="i")  # fmt: skip


def _sed(args: list[Word]) -> Writes:
    options, operands = _getopt(args, _SED, frozenset({"--in-place"}))
    scripts = [w.text for w in _values(options, ("-e", "--expression"))]
    sandboxed = _has(options, ("--sandbox",))  # no w, r or e commands
    out = Writes()
    if _has(options, ("-f", "--file")):
        if not sandboxed:
            out.unread.append("sed -f reads a script that may write files (its w command)")
    elif not scripts and operands:
        scripts, operands = [operands[0].text], operands[1:]
    if _has(options, ("-i", "--in-place")):
        out.found += _files(operands)
    for script in [] if sandboxed else scripts:
        named = sed_script_writes(script)
        if named is None:
            out.unread.append("sed's script could not be read for the files it writes")
        else:
            out.found += _files(_plain(name) for name in named)
    return out


_SED_PLAIN = frozenset("=dDgGhHlLnNpPqQxzF")
"""sed commands without a file (a number after `q`, `l`... is skipped as an address is)."""


def sed_script_writes(script: str) -> list[str] | None:
    """The files a sed script's `w`/`W` commands and `s///w` flags write; None where the
    script is not one this reader follows (then the call may write files it does not name)."""
    reader = _SedReader(script)
    return reader.names if reader.read() else None


class _SedReader:
    def __init__(self, script: str) -> None:
        self.s, self.n, self.names = script, len(script), list[str]()

    def rest_of_line(self, i: int) -> tuple[str, int]:
        end = self.s.find("\n", i)
        end = self.n if end < 0 else end
        return self.s[i:end].strip(), end

    def past(self, i: int, delim: str, *, regex: bool = True) -> int:
        """The index after the next unescaped `delim` from `i` (in a regex, bracket
        expressions skipped)."""
        s = self.s
        while i < self.n and s[i] != delim:
            if s[i] == "\\":
                i += 1
            elif regex and s[i] == "[":
                close = s.find("]", i + 2)
                i = close if close > 0 else i
            i += 1
        return i + 1

    def read(self) -> bool:
        s, i = self.s, 0
        while i < self.n:
            c = s[i]
            if c in " \t\n;{}!,~+$" or c.isdigit():
                i += 1
            elif c in "/\\":  # an address: /re/ or \cREc
                delim = c if c == "/" else (s[i + 1] if i + 1 < self.n else "/")
                i = self.past(i + (1 if c == "/" else 2), delim)
                while i < self.n and s[i] in "IM":
                    i += 1
            elif c == "#" or c in "rReWw":
                name, i = self.rest_of_line(i + 1)
                if c in "wW":
                    self.names.append(name)
            elif c in ":btTv":
                while i < self.n and s[i] not in ";\n":
                    i += 1
            elif c in "aic":
                i += 1
                while i < self.n and s[i] != "\n":
                    i += 2 if s[i] == "\\" else 1
            elif c in _SED_PLAIN:
                i += 1
            elif c in "sy" and i + 1 < self.n:
                i = self.past(self.past(i + 2, s[i + 1], regex=c == "s"), s[i + 1], regex=False)
                while c == "s" and i < self.n and s[i].isalnum() and s[i] != "w":
                    i += 1  # the flags (`e` runs the line: sed runs code, unseen)
                if c == "s" and i < self.n and s[i] == "w":
                    name, i = self.rest_of_line(i + 1)
                    self.names.append(name)
            else:
                return False
        return True


# -- archives, patches, splits -----------------------------------------------------------------

_TAR = _Grammar("fCbTXgKNVLFIH", frozenset({
    "--file", "--directory", "--blocking-factor", "--files-from", "--exclude-from", "--exclude",
    "--listed-incremental", "--starting-file", "--newer", "--newer-mtime", "--after-date",
    "--label", "--tape-length", "--info-script", "--new-volume-script",
    "--use-compress-program", "--format", "--owner", "--group", "--mode", "--mtime",
    "--transform", "--xform", "--strip-components", "--checkpoint-action", "--to-command",
    "--volno-file", "--index-file", "--suffix", "--record-size", "--rmt-command",
    "--rsh-command", "--exclude-tag", "--level", "--owner-map", "--group-map", "--pax-option",
    "--warning",
}), longs=frozenset({
    "--create", "--append", "--update", "--catenate", "--concatenate", "--delete", "--extract",
    "--get", "--list", "--diff", "--compare", "--to-stdout",
}))  # fmt: skip
_TAR_CREATES = (
    "-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate",
    "--delete",
)  # fmt: skip


def _tar(args: list[Word]) -> Writes:
    options: _Options = []
    rest = args
    if args and re.fullmatch(r"[A-Za-z]+", args[0].text):  # `tar xzf a.tar`: the old style
        rest, k = args[1:], 0
        for letter in args[0].text:
            value = None
            if letter in _TAR.values:
                value = rest[k] if k < len(rest) else None
                k += 1
            options.append(("-" + letter, value))
        rest = rest[k:]
    prefer = frozenset({"--file", "--directory", "--listed-incremental"})
    options += _getopt(rest, _TAR, prefer)[0]
    out = Writes(
        _files(_values(options, ("-g", "--listed-incremental", "--volno-file", "--index-file")))
    )
    if _has(options, _TAR_CREATES):
        out.found += _files(_values(options, ("-f", "--file")))
    extracts = _has(options, ("-x", "--extract", "--get"))
    if extracts and not _has(options, ("-O", "--to-stdout", "--to-command")):
        folders = tuple(_values(options, ("-C", "--directory")))
        out.found.append(Written(_plain("."), into=True, base=folders))
    return out


_PATCH = _Grammar("BdDFiopVrYzg", frozenset({
    "--prefix", "--directory", "--ifdef", "--fuzz", "--input", "--output", "--strip",
    "--reject-file", "--version-control", "--basename-prefix", "--suffix", "--get",
    "--quoting-style",
}), longs=frozenset({"--dry-run", "--check"}))  # fmt: skip


def _patch(args: list[Word]) -> Writes:
    options, operands = _getopt(args, _PATCH, frozenset({"--output", "--reject-file"}))
    if _has(options, ("--dry-run", "--check")):
        return Writes()
    base = tuple(_values(options, ("-d", "--directory")))
    out = Writes(_files(_values(options, ("-r", "--reject-file")), base))
    named = _values(options, ("-o", "--output"))
    if named:
        out.found += _files(named, base)
    elif operands:
        out.found += _files(operands[:1], base)
    else:  # the files its input names
        out.found.append(Written(_plain("."), into=True, base=base))
    return out


_SPLIT = _Grammar("abClnt", frozenset({
    "--suffix-length", "--bytes", "--line-bytes", "--lines", "--number", "--separator",
    "--additional-suffix", "--filter",
}))  # fmt: skip
_CSPLIT = _Grammar("bfn", frozenset({"--suffix-format", "--prefix", "--digits"}))


def _split(args: list[Word]) -> Writes:
    options, operands = _getopt(args, _SPLIT)
    if _has(options, ("--filter",)):
        return Writes()  # its output goes to a command (a runner, followed as one)
    prefix = operands[1] if len(operands) > 1 else _plain("x")
    suffix = "".join(w.text for w in _values(options, ("--additional-suffix",)))
    return Writes([Written(_folder_of(prefix), into=True, names=_name_glob(prefix, suffix))])


def _csplit(args: list[Word]) -> Writes:
    options, _ = _getopt(args, _CSPLIT)
    given = _values(options, ("-f", "--prefix"))
    prefix = given[-1] if given else _plain("xx")
    return Writes([Written(_folder_of(prefix), into=True, names=_name_glob(prefix))])


def _unzip(args: list[Word]) -> Writes:
    flags: set[str] = set()
    folder: Word | None = None
    for k, word in enumerate(args):
        text = word.text
        if text.startswith("-d") and len(text) > 2:
            folder = _tail(word, 2)
        elif text == "-d" and k + 1 < len(args):
            folder = args[k + 1]
        elif text.startswith("-") and len(text) > 1:
            flags.update(text[1:])
    if flags & set("ltvpczZ"):
        return Writes()
    return Writes([Written(folder or _plain("."), into=True)])


_PACKERS = frozenset({
    "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd", "unzstd",
    "lz4", "unlz4", "pigz", "unpigz", "compress", "uncompress", "brotli", "lzip",
})  # fmt: skip
_PACKER = _Grammar("SoDT", frozenset({"--suffix", "--threads", "--memlimit", "--output"}))


def _packer(args: list[Word]) -> Writes:
    """gzip and the like replace a file by its (un)packed copy beside it."""
    options, operands = _getopt(args, _PACKER, frozenset({"--output"}))
    if _has(options, ("-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list")):
        return Writes()
    out = Writes(_files(_values(options, ("-o", "--output"))))
    suffixes = [w.text for w in _values(options, ("-S", "--suffix")) if w.text]
    for word in operands:
        out.found += _files([word])
        stem = next((word.text[: -len(s)] for s in suffixes if word.text.endswith(s)), None)
        stem = stem or posixpath.splitext(word.text)[0]
        if stem and stem != word.text:
            out.found.append(Written(_head(word, len(stem))))
    return out


# -- git ---------------------------------------------------------------------------------------

_CLONE = _Grammar("obucj", frozenset({
    "--origin", "--branch", "--upload-pack", "--reference", "--reference-if-able",
    "--separate-git-dir", "--depth", "--shallow-since", "--shallow-exclude", "--config",
    "--filter", "--template", "--jobs", "--server-option", "--bundle-uri", "--ref-format",
}), abbreviations=False)  # fmt: skip
_INIT = _Grammar("b", frozenset({
    "--template", "--separate-git-dir", "--object-format", "--ref-format", "--initial-branch",
}), abbreviations=False)  # fmt: skip
_WORKTREE = _Grammar("bB", frozenset({"--reason"}), abbreviations=False)
_BUNDLE = _Grammar(long_values=frozenset({"--version"}), abbreviations=False)
_GIT_APPLY_READS = frozenset({"--check", "--stat", "--numstat", "--summary", "--cached"})


def _git(args: list[Word]) -> Writes:
    """git's writes, after its global options (`-C` folders are where relative paths
    start)."""
    call = read_git(args)
    word, rest, _ = expand_aliases(call)  # a `!` alias: its code is read as code
    if word is None:
        return Writes()
    base, sub = tuple(call.dirs), word.text
    out = Writes(_files(_option_values(rest, ("--output",)), base))
    if sub == "archive":
        out.found += _files(_option_values(rest, ("-o",)), base)
    elif sub == "format-patch" and "--stdout" not in (w.text for w in rest):
        folders = _option_values(rest, ("-o", "--output-directory"))
        here = folders[-1] if folders else _plain(".")
        out.found.append(Written(here, into=True, names="*.patch", base=base))
    elif sub == "bundle":
        operands = _getopt(rest, _BUNDLE)[1]
        if operands[:1] and operands[0].text == "create":
            out.found += _files(operands[1:2], base)
    elif sub == "config":
        out.found += _files(_option_values(rest, ("-f", "--file")), base)
    elif sub == "clone":
        options, operands = _getopt(rest, _CLONE)
        if operands:
            where = operands[1] if len(operands) > 1 else _plain(_humanish(operands[0].text))
            out.found.append(Written(where, into=True, base=base))
        folders = _values(options, ("--separate-git-dir",))
        out.found += [Written(w, into=True, base=base) for w in folders]
    elif sub == "init":
        operands = _getopt(rest, _INIT)[1]
        where = operands[0] if operands else _plain(".")
        git_dir = Word(
            where.text.rstrip("/") + "/.git", where.key.rstrip("/") + "/.git", where.dynamic
        )
        out.found.append(Written(git_dir, into=True, base=base))
    elif sub == "worktree":
        operands = _getopt(rest, _WORKTREE)[1]
        if len(operands) > 1 and operands[0].text == "add":
            out.found.append(Written(operands[1], into=True, base=base))
    elif sub in ("apply", "am") and not _GIT_APPLY_READS & {w.text for w in rest}:
        out.found.append(Written(_plain("."), into=True, base=base))
    return out


def _humanish(url: str) -> str:
    """The folder `git clone URL` makes: the URL's last part without `.git`."""
    name = url.rstrip("/").removesuffix("/.git").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or "."


# -- the table ---------------------------------------------------------------------------------

WRITERS: dict[str, _Writer] = {
    "sort": _option_writer(_SORT, files=("-o", "--output")),
    "shuf": _option_writer(_SHUF, files=("-o", "--output")),
    "tee": _option_writer(_TEE, operands=_all),
    "truncate": _option_writer(_TRUNCATE, operands=_all),
    "uniq": _option_writer(_UNIQ, operands=_second),
    "xxd": _option_writer(_XXD, operands=_second),
    "time": _option_writer(_TIME, files=("-o", "--output")),
    "strace": _option_writer(_STRACE, files=("-o",)),
    "ltrace": _option_writer(_LTRACE, files=("-o",)),
    "script": _option_writer(
        _SCRIPT,
        files=("-O", "--log-out", "-I", "--log-in", "-B", "--log-io", "-T", "--log-timing"),
        operands=_first_or_typescript,
    ),
    "dd": _dd,
    "find": _find,
    "openssl": _openssl,
    **{name: _copy(name) for name in _COPIES},
    "rsync": _transfer(
        _RSYNC,
        files=("--log-file", "--write-batch", "--only-write-batch"),
        folders=("--backup-dir", "-T", "--temp-dir"),
    ),
    "scp": _transfer(_SCP),
    "curl": _curl,
    "wget": _wget,
    "tar": _tar,
    "gtar": _tar,
    "bsdtar": _tar,
    "sed": _sed,
    "gsed": _sed,
    "patch": _patch,
    "split": _split,
    "csplit": _csplit,
    "unzip": _unzip,
    **dict.fromkeys(_PACKERS, _packer),
    "git": _git,
}
"""Program -> what it writes, given its arguments (the module doc lists them)."""


def writes(program: str, args: list[Word]) -> Writes:
    """What `program ARGS` writes (nothing for a program not in `WRITERS`)."""
    writer = WRITERS.get(program)
    return writer(args) if writer is not None else Writes()
