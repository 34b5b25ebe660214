"""A small Hugging Face Hub on the loopback, for the tests of `cleanrl_utils.huggingface` and
`cleanrl_utils.enjoy`: the real `huggingface_hub` client talks to it through `HF_ENDPOINT`.

It implements exactly the calls that client makes for our push and our download (read from
`huggingface_hub` 2.4's `hf_api.py`, `_commit_api.py` and `file_download.py`):

- `GET /api/whoami-v2` (`HfApi.whoami`): `{"type": "user", "name": USER}`.
- `POST /api/repos/create` (`HfApi.create_repo`), JSON `{"name", "organization", ...}`:
  `{"url": ...}`; 409 (with the url) when the repository exists, which `exist_ok` accepts.
- `POST /api/validate-yaml` (`create_commit` checks a README.md's metadata first):
  `{"errors": [], "warnings": []}`.
- `POST /api/models/{namespace}/{name}/preupload/{revision}` (`_fetch_upload_modes`), JSON
  `{"files": [{"path", "sample", "size"}]}`: every file `"uploadMode": "regular"`, so that its
  bytes come inline (base64) in the commit: no LFS or Xet upload is ever asked for.
- `POST /api/models/{namespace}/{name}/commit/{revision}` (`_send_commit`), ndjson: a `header`
  line, then one `file` line per file (`{"path", "content", "encoding": "base64"}`); the files
  are stored and `{"commitUrl", "commitOid"}` returned.
- `HEAD` and `GET /{namespace}/{name}/resolve/{revision}/{path}` (`hf_hub_download`): the file,
  with `X-Repo-Commit`, `ETag` and `Content-Length`; 404 with `X-Error-Code: RepoNotFound` or
  `EntryNotFound`.

Every call but the downloads needs `Authorization: Bearer {token}` (else 401), and a user may
create and write repositories in their own namespace only (else 403). `fail_next(call, *codes)`
answers the next calls of `call` (`"create"`, `"preupload"`, `"commit"`, `"whoami"`) with those
HTTP codes, to test retries and errors. What arrived: `repos[repo_id] = {path: bytes}`,
`commits[repo_id]` (one header per commit), `calls` (method, path, code).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = re.compile(
    r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<call>preupload|commit)/(?P<rev>[^/?]+)"
)
RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>[^?]+)")


class LoopbackHub:
    """`with LoopbackHub() as hub:` serves on `hub.url` until the block ends."""

    def __init__(self, user: str = "tester", token: str = "hf_loopback_token"):
        self.user, self.token = user, token
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: dict[str, list[dict]] = defaultdict(list)
        self.calls: list[tuple[str, str, int]] = []
        self.failures: dict[str, list[int]] = defaultdict(list)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> LoopbackHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, call: str, *codes: int) -> None:
        with self.lock:
            self.failures[call].extend(codes)

    def add_repo(self, repo_id: str, files: dict[str, bytes]) -> None:
        """A repository as if someone had pushed `files` to it."""
        with self.lock:
            self.repos[repo_id] = dict(files)
            self.commits[repo_id].append({"summary": "added by the test", "oid": "0" * 40})

    def env(self, token: str | None = None) -> dict[str, str]:
        """The environment variables that point `huggingface_hub` here (with `token`, or the
        right one)."""
        return {
            "HF_ENDPOINT": self.url,
            "HF_TOKEN": self.token if token is None else token,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def reply(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
                with hub.lock:
                    hub.calls.append((self.command, self.path, code))
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def reply_json(self, code: int, data, headers: dict | None = None) -> None:
                headers = {"Content-Type": "application/json", **(headers or {})}
                self.reply(code, json.dumps(data).encode(), headers)

            def error(self, code: int, message: str, error_code: str | None = None) -> None:
                headers = {"X-Error-Message": message}
                if error_code:
                    headers["X-Error-Code"] = error_code
                self.reply_json(code, {"error": message}, headers)

            def body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))

            def refused(self, call: str, namespace: str | None = None) -> bool:
                """Answered already: an injected failure, a bad token, another's namespace."""
                with hub.lock:
                    injected = hub.failures[call].pop(0) if hub.failures[call] else None
                if injected is not None:
                    self.error(injected, f"injected {injected}")
                elif self.headers.get("Authorization") != f"Bearer {hub.token}":
                    self.error(401, "Invalid credentials in Authorization header")
                elif namespace is not None and namespace != hub.user:
                    self.error(
                        403, f"You don't have the rights to create a model under {namespace}"
                    )
                else:
                    return False
                return True

            def do_GET(self) -> None:
                if self.path.startswith("/api/whoami-v2"):
                    if not self.refused("whoami"):
                        self.reply_json(200, {"type": "user", "name": hub.user})
                    return
                match = RESOLVE.match(self.path)
                if match is None:
                    self.error(404, f"not implemented: GET {self.path}")
                    return
                with hub.lock:
                    files = hub.repos.get(match["repo"])
                    commit = hub.commits[match["repo"]][-1]["oid"] if files else None
                if files is None:
                    self.error(404, "Repository not found", "RepoNotFound")
                elif match["path"] not in files:
                    self.error(404, "Entry not found", "EntryNotFound")
                else:
                    data = files[match["path"]]
                    etag = f'"{hashlib.sha256(data).hexdigest()}"'
                    self.reply(200, data, {"X-Repo-Commit": commit, "ETag": etag})

            do_HEAD = do_GET

            def do_POST(self) -> None:
                body = self.body()
                if self.path.startswith("/api/repos/create"):
                    request = json.loads(body)
                    namespace = request.get("organization") or hub.user
                    if self.refused("create", namespace):
                        return
                    repo_id = f"{namespace}/{request['name']}"
                    with hub.lock:
                        exists = repo_id in hub.repos
                        hub.repos.setdefault(repo_id, {})
                    url = {"url": f"{hub.url}/{repo_id}"}
                    if exists:  # (the client reads the url of the 409 too, with exist_ok)
                        message = "You already created this model repo"
                        self.reply_json(
                            409, {"error": message, **url}, {"X-Error-Message": message}
                        )
                    else:
                        self.reply_json(200, url)
                    return
                if self.path.startswith("/api/validate-yaml"):
                    self.reply_json(200, {"errors": [], "warnings": []})
                    return
                match = COMMIT.match(self.path)
                if match is None:
                    self.error(404, f"not implemented: POST {self.path}")
                    return
                repo_id, call = match["repo"], match["call"]
                if self.refused(call, repo_id.split("/")[0]):
                    return
                if repo_id not in hub.repos:
                    self.error(404, "Repository not found", "RepoNotFound")
                elif call == "preupload":
                    files = json.loads(body)["files"]
                    modes = [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                        for f in files
                    ]
                    self.reply_json(200, {"files": modes})
                else:
                    self.commit(repo_id, body)

            def commit(self, repo_id: str, body: bytes) -> None:
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                header = lines[0]["value"] if lines and lines[0]["key"] == "header" else None
                if header is None:
                    self.error(400, "a commit starts with its header")
                    return
                files = {}
                for line in lines[1:]:
                    if line["key"] != "file":
                        self.error(400, f"unexpected commit operation {line['key']}")
                        return
                    value = line["value"]
                    files[value["path"]] = base64.b64decode(value["content"])
                oid = hashlib.sha1(body).hexdigest()
                with hub.lock:
                    hub.repos[repo_id].update(files)
                    hub.commits[repo_id].append({**header, "oid": oid, "files": sorted(files)})
                url = f"{hub.url}/{repo_id}/commit/{oid}"
                self.reply_json(200, {"commitUrl": url, "commitOid": oid})

        return Handler
