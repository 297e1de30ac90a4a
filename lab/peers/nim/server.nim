## Nim peer of the Peregrine lab: the standard library's `asynchttpserver` (Debian's `nim`), hand
## routing. Single-threaded by design; WORKERS > 1 forks that many processes sharing the port with
## SO_REUSEPORT. It serves plaintext, json, param, post_json and empty: the main scenarios and the
## 204 (the others would only repeat hand routing).
import std/[asynchttpserver, asyncdispatch, json, os, strutils, posix, times]

const hello = "Hello, World!"

proc answer(req: Request, code: HttpCode, ctype, body: string): Future[void] =
  var headers = newHttpHeaders({"Server": "Nim asynchttpserver"})
  if ctype.len > 0:
    headers["Content-Type"] = ctype
  # asynchttpserver's respond adds Content-Length itself (and none for a 204) but no Date.
  headers["Date"] = now().utc.format("ddd, dd MMM yyyy HH:mm:ss 'GMT'")
  req.respond(code, body, headers)

proc notFound(req: Request): Future[void] = answer(req, Http404, "text/plain", "Not Found")

proc handle(req: Request) {.async, gcsafe.} =
  let path = req.url.path
  let get = req.reqMethod in {HttpGet, HttpHead}
  if get and path == "/plaintext":
    await answer(req, Http200, "text/plain; charset=utf-8", hello)
  elif get and path == "/json":
    await answer(req, Http200, "application/json", $(%*{"message": hello}))
  elif get and path.startsWith("/users/"):
    let raw = path[7 .. ^1]
    if raw.len in 1..15 and raw.allCharsInSet(Digits):
      let id = parseBiggestUInt(raw)
      await answer(req, Http200, "application/json", $(%*{"id": id, "name": "user-" & $id}))
    else:
      await notFound(req)
  elif req.reqMethod == HttpPost and path == "/users":
    try:
      let b = parseJson(req.body)
      let user = %*{"name": b["name"].getStr, "email": b["email"].getStr, "age": b["age"].getInt}
      if b["name"].kind != JString or b["email"].kind != JString or b["age"].kind != JInt or
          b["age"].getInt < 0:
        raise newException(ValueError, "bad user")
      await answer(req, Http201, "application/json", $user)
    except CatchableError:
      await answer(req, Http400, "text/plain", "Bad Request")
  elif get and path == "/empty":
    await answer(req, Http204, "", "")
  else:
    await notFound(req)

proc serve(port: Port, address: string) {.async.} =
  let server = newAsyncHttpServer(reuseAddr = true, reusePort = true)
  await server.serve(port, handle, address)

let addrEnv = getEnv("ADDR", "127.0.0.1:8080")
let cut = addrEnv.rfind(':')
let host = addrEnv[0 ..< cut]
let port = Port(parseInt(addrEnv[cut + 1 .. ^1]))
let workers = parseInt(getEnv("WORKERS", "1"))
if workers > 1:
  # Children share the port with SO_REUSEPORT; a SIGTERM to the process group stops them all.
  for i in 1 ..< workers:
    if fork() == 0:
      break
waitFor serve(port, host)
