#!/usr/bin/python3
"""Debian's pyverbs drives softverbs0 through our libmlx5.so.1 with DEVX.

Run under `softverbs run --`. Exits 77 (ctest skip) when pyverbs is missing.
Boxes are built here with struct (big-endian dwords, spec offsets).
"""
import errno
import struct
import sys

try:
    from pyverbs.providers.mlx5.mlx5dv import (Mlx5Context, Mlx5DVContextAttr,
                                               Mlx5DevxObj)
    import pyverbs.providers.mlx5.mlx5_enums as dve
    from pyverbs.pyverbs_error import PyverbsRDMAError
except ImportError as e:
    print(f'pyverbs not available: {e}')
    sys.exit(77)


def box(opcode, op_mod=0, size=16):
    data = bytearray(size)
    struct.pack_into('>HHHH', data, 0, opcode, 0, 0, op_mod)
    return bytes(data)


def bits(data, off, width):
    value = int.from_bytes(data, 'big')
    total = len(data) * 8
    return (value >> (total - off - width)) & ((1 << width) - 1)


def main():
    attr = Mlx5DVContextAttr(flags=dve.MLX5DV_CONTEXT_FLAGS_DEVX)
    ctx = Mlx5Context(attr, name='softverbs0')
    dev = ctx.query_device()

    # QUERY_HCA_CAP, general caps, current (op_mod 1): 16 + 2048 bytes as
    # rdma-core's own test reads it.
    out = ctx.devx_general_cmd(box(0x100, 1), 16 + 2048)
    assert bits(out, 0, 8) == 0, 'status'
    log_max_qp = bits(out, 0x80 + 0x9b, 5)
    assert 1 << log_max_qp == dev.max_qp, (log_max_qp, dev.max_qp)
    assert bits(out, 0x80 + 0x1b8, 8) == dev.phys_port_cnt

    assert ctx.devx_query_eqn(0) == 0

    # A DEVX PD: its number comes back in DW2[23:0].
    pd = Mlx5DevxObj(ctx, box(0x800), 16)
    assert bits(pd.out_view, 0x48, 24) != 0, 'pdn'
    pd.close()

    # An opcode no firmware knows: EREMOTEIO.
    try:
        ctx.devx_general_cmd(box(0xb05), 16)
        raise AssertionError('unknown opcode accepted')
    except PyverbsRDMAError as e:
        assert e.error_code == errno.EREMOTEIO, e

    ctx.close()
    print('pyverbs DEVX: ok')


if __name__ == '__main__':
    main()
