# The watchers of `stepwise bench scale`: many Server-Sent Events streams held open at once,
# in a process apart from the server, so that the server's memory is its own. Each prints,
# for every event that matters, when it arrived (ns since the epoch); the bench knows when
# each was written and works out the delays.
#
#   python3 watchers.py HOST PORT COOKIE JOB_ID JOB_WATCHERS LIST_WATCHERS ROUNDS
#
# "ready" once every stream answered; then lines "job <event id> <ns>" and
# "list <job id> <ns>"; it ends when every watcher saw ROUNDS events, or after 60 s.
import asyncio
import json
import sys
import time

host, port, cookie, job = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
job_watchers, list_watchers, rounds = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
out = []


async def watch(path, on_line, connected):
    reader, writer = await asyncio.open_connection(host, port)
    # HTTP/1.0: the body is not chunked, so it reads as plain lines.
    request = f"GET {path} HTTP/1.0\r\nHost: {host}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise SystemExit(f"{path}: {status!r}")
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass
    connected.set()
    # Whole chunks, not lines: one read (and one timestamp) per burst the server sends,
    # which keeps this process's own delay out of the figures as far as it can be.
    seen, buffer = 0, b""
    while seen < rounds:
        chunk = await reader.read(65536)
        if not chunk:
            return
        at = time.time_ns()
        buffer += chunk
        *messages, buffer = buffer.split(b"\n\n")
        for message in messages:
            for line in message.split(b"\n"):
                seen += on_line(line.decode().rstrip("\r"), at)
    writer.close()


def job_line(replayed):
    def on(line, at):
        if line.startswith("id:"):
            event = int(line[3:].strip())
            if event > replayed:
                out.append(f"job {event} {at}")
                return 1
        return 0
    return on


def list_line(line, at):
    if line.startswith("data:"):
        change = json.loads(line[5:])
        if change.get("what") == "changed":
            out.append(f"list {change['jobId']} {at}")
            return 1
    return 0


async def main():
    replayed = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    tasks, ready = [], []
    for i in range(job_watchers + list_watchers):
        connected = asyncio.Event()
        ready.append(connected)
        if i < job_watchers:
            path = f"/api/queue/jobs/{job}/events/stream?after={replayed}"
            tasks.append(asyncio.create_task(watch(path, job_line(replayed), connected)))
        else:
            tasks.append(asyncio.create_task(watch("/api/queue/jobs/stream", list_line, connected)))
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in ready)), 60)
    print("ready", flush=True)
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    except asyncio.TimeoutError:
        pass
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()


asyncio.run(main())
