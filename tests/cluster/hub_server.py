"""A local model hub for tests: the part of the Hub API that ``huggingface_hub`` calls.

No machine here reaches a hub, so the tests run the real ``huggingface_hub`` client against this
server on 127.0.0.1. It serves

* ``GET /api/models?search=…&filter=…`` — search;
* ``GET /api/models/{repo}`` and ``…/revision/{rev}`` — model info with siblings (sizes, LFS);
* ``GET /api/models/{repo}/tree/{rev}[/{path}]`` — the tree listing (LFS oid and size);
* ``HEAD``/``GET /{repo}/resolve/{rev}/{path}`` — ``ETag``, ``X-Repo-Commit``,
  ``X-Linked-Etag``, ``X-Linked-Size``, and, as huggingface.co does for LFS files, a 302 to a
  storage host (here a second port, so the library treats it as another host: no token goes
  there); that host answers ``Accept-Ranges`` and ``Range`` requests (206).
  ``HubServer(…, cdn=False)`` serves the bytes from ``resolve`` itself, as some mirrors do.

Faults for tests: :attr:`HubServer.cut_after` drops the connection after that many bytes of a
file body (once), :attr:`HubServer.corrupt` flips a byte of what is served, and every request is
kept in :attr:`HubServer.requests` (method, path, Range header).

:func:`split_gguf` writes a model as the shards of a split GGUF with gguf's own writer.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Repo:
    """A repository: files by path, and the commit they are at."""

    files: dict[str, Path]
    # a fresh commit per repository, as a real hub's: clients may keep what they read per commit
    commit: str = field(default_factory=lambda: secrets.token_hex(20))
    downloads: int = 0

    def sha256(self, path: str) -> str:
        return _sha256(self.files[path])


_HASHES: dict[Path, str] = {}


def _sha256(p: Path) -> str:
    if p not in _HASHES:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _HASHES[p] = h.hexdigest()
    return _HASHES[p]


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None = None


class _Server(ThreadingHTTPServer):
    """A threaded HTTP server whose connections can be cut at the end: a client that keeps a
    connection alive would otherwise keep its thread reading for ever after the test."""

    daemon_threads = False  # server_close() joins them

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request, client_address) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            open_now = list(self._open)
        for conn in open_now:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class HubServer:
    """The server; use as a context manager. ``url`` is its address (the ``HF_ENDPOINT``).

    Attributes:
        repos: repositories by id (``owner/name``).
        requests: every request received.
        cut_after: drop the connection after this many bytes of the next file body (then None).
        corrupt: ``(path, offset)``: serve that byte of that file flipped.
        chunk_pause: cleared, file bodies stop before their next chunk (once ``pause_after``
            bytes of the body are sent) until it is set again: to catch a download midway.
        pause_after: see ``chunk_pause`` (default 0: before the first byte).
    """

    def __init__(self, repos: dict[str, Repo], cdn: bool = True) -> None:
        self.repos = repos
        self.requests: list[Request] = []
        self.cut_after: int | None = None
        self.corrupt: tuple[str, int] | None = None
        self.pause_after = 0
        self.chunk_pause = threading.Event()
        self.chunk_pause.set()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self._cdn = _Server(("127.0.0.1", 0), self._handler()) if cdn else None
        self._threads = [threading.Thread(target=h.serve_forever, daemon=True)
                         for h in (self._httpd, self._cdn) if h is not None]

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def cdn_url(self) -> str | None:
        """The storage host's address (None with ``cdn=False``)."""
        if self._cdn is None:
            return None
        host, port = self._cdn.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubServer:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.chunk_pause.set()
        for h in (self._httpd, self._cdn):
            if h is not None:
                h.shutdown()
                h.close_connections()
                h.server_close()  # joins the connections' threads
        for t in self._threads:
            t.join(10)

    def file_requests(self, name: str) -> list[Request]:
        """The GET requests of the bytes of ``name`` (a file name or path), on the storage host
        (or at ``resolve`` without one)."""
        where = "/cdn/" if self._cdn is not None else "/resolve/"
        return [r for r in self.requests if r.method == "GET" and where in r.path
                and r.path.endswith("/" + name)]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:  # quiet
                pass

            def _json(self, obj, status: int = 200) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _not_found(self, what: str, code: str = "RepoNotFound") -> None:
                body = json.dumps({"error": what}).encode()
                self.send_response(404)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", what)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_HEAD(self) -> None:  # noqa: N802
                self.do_GET()

            def do_GET(self) -> None:  # noqa: N802
                url = urllib.parse.urlsplit(self.path)
                path = urllib.parse.unquote(url.path)
                server.requests.append(Request(self.command, path, self.headers.get("Range"),
                                               self.headers.get("Authorization")))
                q = urllib.parse.parse_qs(url.query)
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) == 2:
                    return self._search(q)
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    repo_id = "/".join(parts[2:4])
                    repo = server.repos.get(repo_id)
                    if repo is None:
                        return self._not_found(f"Repository Not Found for url: {self.path}")
                    rest = parts[4:]
                    if not rest or rest[0] == "revision":
                        return self._info(repo_id, repo)
                    if rest[0] == "tree":
                        return self._tree(repo, "/".join(rest[2:]))
                if parts[0] == "cdn" and len(parts) >= 5:
                    repo = server.repos.get("/".join(parts[1:3]))
                    file = "/".join(parts[4:])
                    if repo is None or file not in repo.files:
                        return self._not_found("no such object", "NotFound")
                    return self._resolve(repo, file, body=True)
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo = server.repos.get("/".join(parts[:2]))
                    file = "/".join(parts[4:])
                    if repo is None:
                        return self._not_found("Repository Not Found")
                    if file not in repo.files:
                        return self._not_found("Entry not found", "EntryNotFound")
                    return self._resolve(repo, file)
                self._not_found(f"no route for {path}", "NotFound")

            def _search(self, q) -> None:
                words = (q.get("search") or [""])[0].lower()
                out = [{"id": rid, "_id": rid, "modelId": rid, "downloads": r.downloads, "likes": 0,
                        "tags": ["gguf"], "library_name": "gguf"}
                       for rid, r in server.repos.items() if words in rid.lower()]
                out.sort(key=lambda d: -d["downloads"])
                limit = int((q.get("limit") or [len(out)])[0])
                self._json(out[:limit])

            def _info(self, repo_id: str, repo: Repo) -> None:
                self._json({"id": repo_id, "_id": repo_id, "modelId": repo_id, "sha": repo.commit,
                            "private": False, "downloads": repo.downloads, "likes": 0, "tags": ["gguf"],
                            "siblings": [{"rfilename": p, "size": f.stat().st_size,
                                          "lfs": {"sha256": repo.sha256(p), "size": f.stat().st_size,
                                                  "pointerSize": 134}}
                                         for p, f in repo.files.items()]})

            def _tree(self, repo: Repo, under: str) -> None:
                entries = []
                for p, f in repo.files.items():
                    if under and not p.startswith(under.rstrip("/") + "/"):
                        continue
                    entries.append({"type": "file", "path": p, "size": f.stat().st_size,
                                    "oid": hashlib.sha1(p.encode()).hexdigest(),
                                    "lfs": {"oid": repo.sha256(p), "size": f.stat().st_size,
                                            "pointerSize": 134}})
                self._json(entries)

            def _resolve(self, repo: Repo, file: str, body: bool = False) -> None:
                src = repo.files[file]
                size = src.stat().st_size
                sha = repo.sha256(file)
                if server.cdn_url and not body:
                    # huggingface.co answers an LFS file with a redirect to its storage host;
                    # the file's metadata comes with the redirect
                    repo_id = next(k for k, v in server.repos.items() if v is repo)
                    self.send_response(302)
                    self.send_header("Location", f"{server.cdn_url}/cdn/{repo_id}/{repo.commit}/"
                                                 + urllib.parse.quote(file))
                    self.send_header("ETag", f'"{sha}"')
                    self.send_header("X-Repo-Commit", repo.commit)
                    self.send_header("X-Linked-Etag", f'"{sha}"')
                    self.send_header("X-Linked-Size", str(size))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start, end = 0, size - 1
                rng = self.headers.get("Range")
                status = 200
                if rng:
                    a, _, b = rng.removeprefix("bytes=").partition("-")
                    start = int(a)
                    end = min(int(b), size - 1) if b else size - 1
                    if start >= size:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                self.send_response(status)
                self.send_header("ETag", f'"{sha}"')
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(size))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start + 1))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.end_headers()
                if self.command == "HEAD":
                    return
                cut = server.cut_after
                if cut is not None:
                    server.cut_after = None
                sent = 0
                with open(src, "rb") as f:
                    f.seek(start)
                    pos = start
                    while pos <= end:
                        block = bytearray(f.read(min(64 * 1024, end - pos + 1)))
                        if server.corrupt and server.corrupt[0] == file:
                            off = server.corrupt[1] - pos
                            if 0 <= off < len(block):
                                block[off] ^= 0xFF
                        if cut is not None and sent + len(block) > cut:
                            self.wfile.write(block[:cut - sent])
                            self.wfile.flush()
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        if sent >= server.pause_after:
                            server.chunk_pause.wait(30)
                        self.wfile.write(block)
                        sent += len(block)
                        pos += len(block)

        return Handler


def split_gguf(src: Path, out_dir: Path, parts: int = 2) -> list[Path]:
    """Write the model ``src`` again as a split GGUF of ``parts`` files
    (``STEM-00001-of-0000N.gguf`` …) in ``out_dir``, with gguf's own writer."""
    import gguf

    reader = gguf.GGUFReader(src)
    arch = reader.get_field("general.architecture").contents()
    per = -(-len(reader.tensors) // parts)
    w = gguf.GGUFWriter(None, arch, split_max_tensors=per)
    for name, fld in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = fld.types[0]
        sub = fld.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, fld.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / src.name
    w.write_header_to_file(path=target)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(out_dir.glob(f"{src.stem}-*-of-*.gguf"))


#: The quants :func:`demo_repo_files` makes of one model.
DEMO_QUANTS = ("Q4_K_M", "Q8_0", "F16")


def demo_repo_files(d: Path, layers: int = 8, embd: int = 256, ff: int = 512) -> dict[str, Path]:
    """A repository's files: three quants of one demo model (``Tiny-Q4_K_M.gguf`` …), the Q8_0
    one again as a split GGUF of two files under ``split/``, and a README."""
    from gui.cluster.llama.random_model import DemoShape, write_demo_model

    files = {}
    for q in DEMO_QUANTS:
        p = write_demo_model(d / f"Tiny-{q}.gguf", DemoShape(layers=layers, embd=embd, ff=ff, quant=q))
        files[p.name] = p
    for p in split_gguf(files["Tiny-Q8_0.gguf"], d / "split"):
        files["split/" + p.name] = p
    files["README.md"] = d / "README.md"
    files["README.md"].write_text("# Tiny GGUF\n")
    return files
