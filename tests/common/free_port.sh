# free_port: prints a TCP port nothing listens on or is bound to on
# 127.0.0.1 now, chosen at random below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range). A port bound to 0 and released comes from
# that range, where the outgoing connections of tests running beside take
# ports too: the server that was to listen there then finds it taken.
# Source this file; needs python3.
free_port() {
  /usr/bin/python3 - <<'PY'
import random, socket
low = 32768
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    pass
first = 10000 if low > 11000 else 1024
for _ in range(200):
    port = random.randrange(first, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port: no free port below the ephemeral range")
PY
}
