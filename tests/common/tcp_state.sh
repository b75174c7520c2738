# wait_tcp PORT STATE: waits (10 s at most) until a TCP socket of this network
# namespace with PORT as its local or remote port is in STATE - "listen" or
# "established" (/proc/net/tcp and tcp6, where they are 0A and 01). Returns 1
# if none came. Tests use it instead of a fixed sleep before a client starts
# (listen) or before killing a side that must have connected (established):
# a perftest server whose client never connects waits in accept() for ever.
# tcp_in_state PORT STATE is one look of the same, for loops that wait on
# more than this. Source this file.
# tcp_in_state PORT STATE: the same, one look, no waiting.
tcp_in_state() {
  local hex code
  hex=$(printf '%04X' "$1")
  case $2 in
    listen) code=0A ;;
    established) code=01 ;;
    *) echo "tcp_in_state: unknown state $2" >&2; return 2 ;;
  esac
  awk -v port="$hex" -v st="$code" 'FNR > 1 && $4 == st {
      n = split($2, l, ":"); m = split($3, r, ":")
      if (l[n] == port || r[m] == port) found = 1
    } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

wait_tcp() {
  for _ in $(seq 500); do
    tcp_in_state "$1" "$2"
    case $? in
      0) return 0 ;;
      2) return 2 ;;
    esac
    sleep 0.02
  done
  return 1
}
