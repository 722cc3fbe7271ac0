"""Write a WiX fragment that installs every file of a folder (what ``heat dir`` does).

The MSI carries two folders whose contents we do not list by hand: the PyInstaller build of
``herd-agent`` and the unpacked llama.cpp release. This script walks one of them and writes a
``<Fragment>`` with one component per file under a ``DirectoryRef``, plus a ``ComponentGroup``
that ``herd-agent.wxs`` references.

Ids are derived from a prefix and the file's relative path, so two folders never collide and the
same file keeps the same id (and, through ``Guid="*"``, the same component GUID) from one build
to the next — which Windows Installer needs to upgrade cleanly.

Usage::

    python file_fragment.py FOLDER --group CG.EngineFiles --prefix eng --var EngineDir \
        --directory-ref INSTALLDIR [--exclude herd-agent.exe] -o engine-files.wxs
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path, PurePosixPath
from xml.sax.saxutils import quoteattr

WIX_NS = "http://schemas.microsoft.com/wix/2006/wi"


def _id(prefix: str, kind: str, rel: str) -> str:
    # MSI identifiers: letters, digits, '_' and '.', at most 72 characters, not starting with a digit.
    digest = hashlib.sha1(rel.encode("utf-8")).hexdigest()[:24].upper()
    return f"{kind}_{prefix}_{digest}"


def collect(folder: Path, exclude: set[str]) -> list[str]:
    """Relative POSIX paths of all files under ``folder``, sorted, minus ``exclude``."""
    if not folder.is_dir():
        raise FileNotFoundError(f"not a folder: {folder}")
    files = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            rel = PurePosixPath(Path(root, name).relative_to(folder).as_posix())
            if str(rel) not in exclude:
                files.append(str(rel))
    return files


def fragment(files: list[str], *, group: str, prefix: str, var: str, directory_ref: str) -> str:
    """The WiX source of a fragment installing ``files`` (relative paths) below ``directory_ref``."""
    # Build a directory tree: {"": [files at root], "sub": [...], "sub/deeper": [...]}
    tree: dict[str, list[str]] = {}
    for rel in files:
        parent = str(PurePosixPath(rel).parent)
        tree.setdefault("" if parent == "." else parent, []).append(rel)
        # Make sure every ancestor directory exists in the tree, even without files of its own.
        p = PurePosixPath(rel).parent
        while str(p) != ".":
            tree.setdefault(str(p), [])
            p = p.parent

    components: list[str] = []

    def emit(dir_rel: str, indent: str) -> list[str]:
        out = []
        for rel in tree.get(dir_rel, []):
            cid = _id(prefix, "cmp", rel)
            fid = _id(prefix, "fil", rel)
            components.append(cid)
            out.append(f'{indent}<Component Id="{cid}" Guid="*" Win64="$(var.Win64)">')
            out.append(f'{indent}  <File Id="{fid}" Name={quoteattr(PurePosixPath(rel).name)} '
                       f'Source={quoteattr(f"$(var.{var})/{rel}")} KeyPath="yes"/>')
            out.append(f"{indent}</Component>")
        children = sorted(d for d in tree if d and str(PurePosixPath(d).parent) == (dir_rel or "."))
        for child in children:
            out.append(f'{indent}<Directory Id="{_id(prefix, "dir", child)}" '
                       f'Name={quoteattr(PurePosixPath(child).name)}>')
            out.extend(emit(child, indent + "  "))
            out.append(f"{indent}</Directory>")
        return out

    body = emit("", "      ")
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<Wix xmlns="{WIX_NS}">',
        "  <Fragment>",
        f'    <DirectoryRef Id="{directory_ref}">',
        *body,
        "    </DirectoryRef>",
        "  </Fragment>",
        "  <Fragment>",
        f'    <ComponentGroup Id="{group}">',
        *(f'      <ComponentRef Id="{c}"/>' for c in components),
        "    </ComponentGroup>",
        "  </Fragment>",
        "</Wix>",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: write the fragment for one folder."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--group", required=True, help="ComponentGroup id to define")
    ap.add_argument("--prefix", required=True, help="short tag that keeps ids of two folders apart")
    ap.add_argument("--var", required=True, help="preprocessor variable holding the folder at build time")
    ap.add_argument("--directory-ref", default="INSTALLDIR")
    ap.add_argument("--exclude", action="append", default=[],
                    help="relative path to leave out (declared by hand in the main source)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        files = collect(args.folder, set(args.exclude))
    except FileNotFoundError as e:
        print(f"file_fragment: {e}", file=sys.stderr)
        return 2
    if not files:
        print(f"file_fragment: no files to install in {args.folder}", file=sys.stderr)
        return 2
    text = fragment(files, group=args.group, prefix=args.prefix, var=args.var,
                    directory_ref=args.directory_ref)
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
