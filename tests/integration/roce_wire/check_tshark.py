#!/usr/bin/python3
"""RoCE v2 packets built by src/roce, decoded by an independent dissector.

Usage: check_tshark.py ROCE_WRITE_PCAP WORKDIR
       check_tshark.py --capture PCAP TSV

roce_write_pcap writes every opcode of the opcode table over IPv4 and IPv6
and a table of each frame's fields (or, with --capture, a capture of the
packets roce_udp_peer sent and their table are given); tshark's InfiniBand
dissector (UDP 4791 is RoCE v2 to it by default) must decode every frame
with no malformed packet or error, the expected opcode, and every extended
header's fields where we put them; frames are matched to the table by PSN,
each exactly once. Exits 77 (SKIP) without tshark.

tshark's payload heuristics guess a protocol inside SEND payloads (RPC over
RDMA, SMB Direct, ...); our test payloads are arbitrary bytes, so the RPC over
RDMA dissector, which claims them, is disabled: the InfiniBand layer is what
is checked. tshark 4.0 does not know XRC (opcodes 0xa0..0xb7 show as
"Unknown OpCode"): for those only the BTH is checked. Nor IBA 1.5's ATOMIC
WRITE (RC 0x1d): its BTH is checked by tshark, its RETH in the bytes tshark
gives as the InfiniBand layer's (-x), at IBA's offsets.
"""
import csv
import json
import os
import shutil
import subprocess
import sys

TSHARK_ARGS = ["--disable-protocol", "rpcordma"]
H_RETH, H_ATOMIC, H_IMM, H_IETH, H_AETH, H_ATOMICACK, H_DETH, H_XRCETH = (
    1, 2, 4, 8, 16, 32, 64, 128)
# Opcodes tshark 4.0 dissects no further than the BTH: RC ATOMIC WRITE.
UNKNOWN_TO_TSHARK = {0x1d}
BTH_BYTES = 12


def reth_of_raw(raw_hex):
    """The RETH right after the BTH in the InfiniBand layer's bytes."""
    raw = bytes.fromhex(raw_hex)[BTH_BYTES:BTH_BYTES + 16]
    return {"infiniband.reth.va": f"0x{int.from_bytes(raw[0:8], 'big'):016x}",
            "infiniband.reth.r_key": f"0x{int.from_bytes(raw[8:12], 'big'):08x}",
            "infiniband.reth.dmalen": str(int.from_bytes(raw[12:16], "big"))}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def hex_bytes(value, n):
    return ":".join(f"{b:02x}" for b in value.to_bytes(n, "big"))


def main():
    if len(sys.argv) != (4 if sys.argv[1:2] == ["--capture"] else 3):
        print(__doc__)
        return 2
    tshark = shutil.which("tshark")
    if not tshark:
        print("SKIP: tshark is not installed (scripts/install-deps.sh installs it)")
        return 77
    if sys.argv[1] == "--capture":
        pcap, tsv = sys.argv[2:]
    else:
        writer, workdir = sys.argv[1:]
        os.makedirs(workdir, exist_ok=True)
        pcap, tsv = os.path.join(workdir, "roce.pcap"), os.path.join(workdir, "roce.tsv")
        run([writer, pcap, tsv])
    with open(tsv) as f:
        expected = list(csv.DictReader(f, delimiter="\t"))
    print(f"{len(expected)} frames in the table, tshark {run([tshark, '--version']).splitlines()[0]}")

    bad = run([tshark, "-r", pcap, *TSHARK_ARGS, "-Y",
               "_ws.malformed || _ws.expert.severity == error"]).strip()
    failures = []
    if bad:
        failures.append("malformed or erroneous frames:\n" + bad)

    frames = json.loads(run([tshark, "-r", pcap, *TSHARK_ARGS, "-T", "json", "-x"]))
    if len(frames) != len(expected):
        failures.append(f"tshark read {len(frames)} frames, {len(expected)} were written")

    by_psn = {int(row["psn"]): row for row in expected}
    seen = set()
    for frame in frames:
        layers = frame["_source"]["layers"]
        ib = layers.get("infiniband")
        number = layers["frame"]["frame.number"]
        if ib is None:
            failures.append(f"captured frame {number}: not decoded as InfiniBand")
            continue
        psn = int(ib.get("infiniband.bth_tree", {}).get("infiniband.bth.psn", "-1"))
        want = by_psn.get(psn)
        if want is None or psn in seen:
            failures.append(f"captured frame {number}: PSN {psn} unexpected or seen twice")
            continue
        seen.add(psn)
        n, name = want["frame"], want["name"]
        ip_layer = "ipv6" if want["ipv6"] == "1" else "ip"
        if ip_layer not in layers:
            failures.append(f"frame {n}: no {ip_layer} layer")
        if layers.get("udp", {}).get("udp.dstport") != "4791":
            failures.append(f"frame {n}: UDP destination port is not 4791")
        if layers.get("udp", {}).get("udp.srcport") != want["src_port"]:
            failures.append(f"frame {n}: UDP source port is not the flow's {want['src_port']}")
        got = {}

        def collect(d):
            for k, v in d.items():
                if isinstance(v, dict):
                    collect(v)
                else:
                    got.setdefault(k, v)
        collect(ib)

        def check(field, value):
            if got.get(field) != value:
                failures.append(f"frame {n} ({name}, opcode {want['opcode']}): {field} is "
                                f"{got.get(field)!r}, expected {value!r}")

        check("infiniband.bth.opcode", want["opcode"])
        check("infiniband.bth.destqp", f"0x{int(want['dest_qp']):06x}")
        check("infiniband.bth.psn", want["psn"])
        check("infiniband.bth.tver", "0")
        check("infiniband.bth.padcnt", str((4 - int(want["payload_len"]) % 4) % 4))
        headers = int(want["headers"])
        if headers & H_XRCETH or int(want["opcode"]) >= 0xa0:
            continue  # tshark 4.0 has no XRC: BTH only
        if int(want["opcode"]) in UNKNOWN_TO_TSHARK:
            raw = layers.get("infiniband_raw")
            if not raw:
                failures.append(f"frame {n} ({name}): tshark gave no InfiniBand bytes")
                continue
            got.update(reth_of_raw(raw[0] if isinstance(raw, list) else raw))
        if headers & H_RETH:
            check("infiniband.reth.va", f"0x{int(want['va']):016x}")
            check("infiniband.reth.r_key", f"0x{int(want['rkey']):08x}")
            check("infiniband.reth.dmalen", want["dma_len"])
        if headers & H_ATOMIC:
            check("infiniband.reth.va", f"0x{int(want['va']):016x}")
            check("infiniband.reth.r_key", f"0x{int(want['rkey']):08x}")
            check("infiniband.atomiceth.swapdt", want["swap_add"])
            check("infiniband.atomiceth.cmpdt", want["compare"])
        if headers & H_AETH:
            check("infiniband.aeth.syndrome", want["syndrome"])
            check("infiniband.aeth.msn", want["msn"])
        if headers & H_ATOMICACK:
            check("infiniband.atomicacketh.origremdt", want["atomic_orig"])
        if headers & H_IMM:
            check("infiniband.immdt", hex_bytes(int(want["imm"]), 4))
        if headers & H_IETH:
            check("infiniband.ieth", hex_bytes(int(want["invalidate_rkey"]), 4))
        if headers & H_DETH:
            check("infiniband.deth.q_key", f"0x{int(want['qkey']):016x}")
            check("infiniband.deth.srcqp", f"0x{int(want['src_qp']):08x}")
        for absent, field in ((H_RETH | H_ATOMIC, "infiniband.reth.va"),
                              (H_AETH, "infiniband.aeth.msn"),
                              (H_DETH, "infiniband.deth.q_key"),
                              (H_IMM, "infiniband.immdt"), (H_IETH, "infiniband.ieth")):
            if not headers & absent and field in got:
                failures.append(f"frame {n} ({name}): tshark found {field}, not sent")

    if len(seen) != len(expected):
        failures.append(f"{len(expected) - len(seen)} frames of the table were not found")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"OK: {len(frames)} frames decoded by tshark's InfiniBand dissector as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
