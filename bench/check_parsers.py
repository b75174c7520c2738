#!/usr/bin/python3
"""Unit tests for bench/'s parsers and report, on the outputs in samples/.

Run: /usr/bin/python3 bench/check_parsers.py  (ctest: bench.parsers).
See samples/README.md for which samples are captured and which are written.
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import perftest  # noqa: E402
import report  # noqa: E402
import ucx  # noqa: E402
import workloads  # noqa: E402


def sample(name):
    with open(os.path.join(HERE, "samples", name)) as f:
        return f.read()


class PerftestParser(unittest.TestCase):
    def test_latency_row(self):
        row = perftest.parse_result(sample("perftest_write_lat_8.txt"))
        self.assertEqual(row["kind"], "lat")
        self.assertEqual(row["bytes"], 8)
        self.assertEqual(row["iterations"], 100000)
        self.assertEqual(row["t_min_us"], 0.31)
        self.assertEqual(row["t_max_us"], 25.40)
        self.assertEqual(row["t_typical_us"], 0.42)
        self.assertEqual(row["t_avg_us"], 0.47)
        self.assertEqual(row["t_stdev_us"], 0.30)
        self.assertEqual(row["p99_us"], 1.10)
        self.assertEqual(row["p999_us"], 9.87)

    def test_bandwidth_row(self):
        row = perftest.parse_result(sample("perftest_write_bw_8.txt"))
        self.assertEqual(row["kind"], "bw")
        self.assertEqual((row["bytes"], row["iterations"]), (8, 200000))
        self.assertEqual(row["bw_peak_mib_s"], 95.12)
        self.assertEqual(row["bw_avg_mib_s"], 93.50)
        self.assertEqual(row["msg_rate_mpps"], 12.255232)

    def test_bandwidth_in_gbits_is_converted_to_mib(self):
        row = perftest.parse_result(sample("perftest_write_bw_8_gbits.txt"))
        self.assertAlmostEqual(row["bw_avg_mib_s"], 0.78e9 / 8 / 2**20)

    def test_large_message(self):
        row = perftest.parse_result(sample("perftest_send_bw_65536.txt"))
        self.assertEqual(row["bytes"], 65536)
        self.assertEqual(row["bw_avg_mib_s"], 8765.43)

    def test_interval_rows_give_their_median_after_the_first(self):
        text = sample("perftest_write_bw_8_infinite.txt")
        row = perftest.parse_intervals(text)
        self.assertEqual((row["bytes"], row["iterations"], row["intervals"]), (8, 27376400, 1))
        self.assertEqual(row["msg_rate_mpps"], 27.374761)
        self.assertEqual(row["bw_avg_mib_s"], 208.85)
        # Every row counted: the lower of the two.
        self.assertEqual(perftest.parse_intervals(text, skip=0)["msg_rate_mpps"], 27.374761)
        with self.assertRaises(perftest.ParseError):
            perftest.parse_intervals(text, skip=2)  # two rows only
        with self.assertRaises(perftest.ParseError):
            perftest.parse_intervals(sample("perftest_write_lat_8.txt"))

    def test_header_without_row_reports_the_error(self):
        with self.assertRaises(perftest.ParseError) as ctx:
            perftest.parse_result(sample("perftest_send_lat_post_recv_failed.txt"))
        self.assertIn("Couldn't post recv", str(ctx.exception))

    def test_garbage_and_empty(self):
        for text in ("", "Failed to open device\n", "\x00\xff random\n#bytes"):
            with self.assertRaises(perftest.ParseError):
                perftest.parse_result(text)
        with self.assertRaises(perftest.ParseError) as ctx:
            perftest.parse_result("Failed to open device\n")
        self.assertEqual(str(ctx.exception), "Failed to open device")

    def test_truncated_row_is_not_a_result(self):
        text = sample("perftest_write_lat_8.txt")
        header_end = text.index("t_min[usec]")
        cut = text[:text.index("\n", header_end)] + "\n 8       100000          0.31\n"
        with self.assertRaises(perftest.ParseError):
            perftest.parse_result(cut)

    def test_gid_index_is_first_roce_v2(self):
        self.assertEqual(perftest.roce_v2_gid_index(sample("ibv_devinfo_v_excerpt.txt")), 1)
        self.assertIsNone(perftest.roce_v2_gid_index("Failed to open device\n"))
        only_v1 = "\t\t\tGID[  0]:\t\tfe80::1, RoCE v1\n\t\t\tGID[  7]:\t\t::1, RoCE v2\n"
        self.assertEqual(perftest.roce_v2_gid_index(only_v1), 7)


class UcxParser(unittest.TestCase):
    def test_latency_final_row(self):
        row = ucx.parse_result(sample("ucx_put_lat_8.txt"))
        self.assertEqual(row["iterations"], 100000)
        self.assertEqual(row["p50_us"], 0.147)
        self.assertEqual(row["lat_us"], 3.955)
        self.assertAlmostEqual(row["msg_rate_mpps"], 0.252869)

    def test_progress_rows_are_skipped_and_overall_is_used(self):
        row = ucx.parse_result(sample("ucx_put_lat_64_progress.txt"))
        self.assertEqual(row["iterations"], 8000000)
        self.assertEqual(row["p50_us"], 0.158)
        # "overall" (1.836), not the last interval's "average" (1.285).
        self.assertEqual(row["lat_us"], 1.836)
        self.assertEqual(row["bw_mib_s"], 33.24)

    def test_bandwidth(self):
        row = ucx.parse_result(sample("ucx_put_bw_65536.txt"))
        self.assertEqual(row["bw_mib_s"], 44062.26)
        self.assertAlmostEqual(row["msg_rate_mpps"], 0.704996)
        # MB in ucx_perftest is 2^20 bytes: rate x size agrees.
        self.assertAlmostEqual(row["msg_rate_mpps"] * 1e6 * 65536 / 2**20, row["bw_mib_s"], places=0)
        row8 = ucx.parse_result(sample("ucx_put_bw_8.txt"))
        self.assertAlmostEqual(row8["msg_rate_mpps"], 65.419472)

    def test_final_only_and_csv(self):
        row = ucx.parse_result(sample("ucx_put_lat_8_final_only.txt"))
        self.assertEqual((row["iterations"], row["p50_us"], row["lat_us"]), (200000, 0.143, 0.240))
        row = ucx.parse_result(sample("ucx_put_lat_8_csv.txt"))
        self.assertEqual((row["iterations"], row["p50_us"], row["lat_us"]), (200000, 0.144, 0.147))
        self.assertEqual(row["bw_mib_s"], 52.00)

    def test_connect_refused(self):
        with self.assertRaises(perftest.ParseError) as ctx:
            ucx.parse_result(sample("ucx_connect_refused.txt"))
        self.assertIn("Connection refused", str(ctx.exception))

    def test_progress_without_final_is_not_a_result(self):
        text = sample("ucx_put_lat_64_progress.txt")
        with self.assertRaises(perftest.ParseError):
            ucx.parse_result(text[:text.index("Final:")])


def _result(name, tool, kind, size, row=None, error=None):
    return {"name": name, "tool": tool, "kind": kind, "size": size, "row": row, "error": error}


class WorkloadParsers(unittest.TestCase):
    def test_reg_mr_cost(self):
        got = workloads.parse_reg_mr(sample("reg_mr_cost.txt"))
        self.assertEqual(sorted(got), [4096, 65536, 1 << 20, 4 << 20, 64 << 20])
        self.assertEqual(got[4096]["reg_first"], 309.09)
        self.assertEqual(got[4096]["reg_first_max"], 1022.31)
        self.assertEqual(got[4096]["malloc_reg_first"], 13.55)
        self.assertEqual(got[1 << 20]["dereg_last"], 13.58)
        self.assertEqual(got[64 << 20]["first_touch"], 189282.35)

    def test_mpi(self):
        got = workloads.parse_mpi(sample("mpi_large_pingpong.txt") + "\nnoise line\n")
        self.assertEqual(got[1 << 20], {"iterations": 20, "rtt_us": 141.38, "bw_mib_s": 14146.54})
        self.assertEqual(got[4 << 20]["bw_mib_s"], 20117.82)

    def test_nothing_parsed_is_an_error(self):
        with self.assertRaises(workloads.ParseError):
            workloads.parse_reg_mr("cannot open device softverbs0\n")
        with self.assertRaises(workloads.ParseError):
            workloads.parse_mpi("PML ucx cannot be selected\n")

    def test_many_qp_row(self):
        row = perftest.parse_result(sample("perftest_write_bw_8_q1000.txt"))
        self.assertEqual((row["bytes"], row["iterations"]), (8, 100000))
        self.assertEqual(row["msg_rate_mpps"], 0.819056)

    def test_targets16(self):
        reg = workloads.parse_reg_mr(sample("reg_mr_cost.txt"))
        mpi = workloads.parse_mpi(sample("mpi_large_pingpong.txt"))
        results = []
        for size in workloads.REG_SIZES:
            row = dict(reg[size], first_touch_64mib_us=reg[64 << 20]["first_touch"])
            results.append(_result("reg_mr", "reg_mr", "reg", size, row))
        for size in workloads.MPI_SIZES:
            results.append(_result("mpi_pingpong", "mpi-softverbs", "bw", size, mpi[size]))
            half = dict(mpi[size], bw_mib_s=mpi[size]["bw_mib_s"] / 4)
            results.append(_result("mpi_pingpong_vader", "mpi-shm", "bw", size, half))
        results.append(_result("ib_write_bw_qps", "softverbs-qps", "bw", 1, None, "timed out"))
        results.append(_result("ucp_put_bw", "ucx", "bw", 8, ucx.parse_result(sample("ucx_put_bw_8.txt"))))
        results.append(_result("ib_write_bw_infinite", "softverbs", "bw", 8,
                               perftest.parse_intervals(sample("perftest_write_bw_8_infinite.txt"))))
        got = {what: (measured, verdict) for what, measured, _, verdict in report.targets16(results)}
        # 27.374761 / 65.419472
        self.assertEqual(got["ib_write_bw 8 B rate, --run_infinitely loop / UCX put rate"],
                         ("0.42x", "met"))
        self.assertEqual(got["ib_write_bw 8 B rate / UCX put rate"], ("", "not measured"))
        self.assertEqual(got["ibv_reg_mr 4 KiB (touched, first time)"], ("309.09 us", "missed"))
        self.assertEqual(got["(info) ibv_reg_mr 4 KiB malloc'ed, first time (allocator may reuse pages)"],
                         ("13.55 us", "-"))
        # 71323.65 / 189282.35
        self.assertEqual(got["ibv_reg_mr 64 MiB / first touch of 64 MiB"], ("0.38x", "missed"))
        # max(reg_again 18.89, reg_before 18.60)
        self.assertEqual(got["ibv_reg_mr 1 MiB again (registered now / before, worse)"],
                         ("18.89 us", "met"))
        self.assertEqual(got["ibv_dereg_mr <= 1 MiB (worst median)"], ("37.23 us", "missed"))
        self.assertEqual(got["MPI ping-pong 4 MiB softverbs / vader"], ("4.00x", "met"))
        self.assertEqual(got["ib_write_bw 8 B rate, 1000 QPs / 1 QP"], ("", "not measured"))
        text = report.markdown(results, {"nproc": "2"}, "test")
        self.assertIn("## Targets (issue 16)", text)
        self.assertIn("| 64 MiB fresh | 71,324 |", text)
        self.assertIn("| 4 KiB malloc'ed | 13.55 |", text)
        self.assertIn("failed: timed out", text)


class Report(unittest.TestCase):
    def results(self):
        return [
            _result("ucp_put_lat", "ucx", "lat", 8, ucx.parse_result(sample("ucx_put_lat_8_final_only.txt"))),
            _result("ucp_put_bw", "ucx", "bw", 65536, ucx.parse_result(sample("ucx_put_bw_65536.txt"))),
            _result("ib_write_lat", "softverbs", "lat", 8, perftest.parse_result(sample("perftest_write_lat_8.txt"))),
            _result("ib_send_lat", "softverbs", "lat", 8, None, "exit 1: Couldn't post recv Qp = 0"),
            _result("ib_write_bw", "softverbs", "bw", 8, perftest.parse_result(sample("perftest_write_bw_8.txt"))),
            _result("ib_write_bw", "softverbs", "bw", 65536, None, "timed out after 60 s"),
        ]

    def test_targets(self):
        got = {what: (measured, verdict) for what, measured, _, verdict in report.targets(self.results())}
        # 0.42 / 0.143
        self.assertEqual(got["ib_write_lat / UCX put latency, 8 B (medians)"], ("2.94x", "met"))
        self.assertEqual(got["ib_send_lat, 8 B (typical)"], ("", "not measured"))
        self.assertEqual(got["ib_write_bw / UCX put bandwidth, 64 KiB"], ("", "not measured"))
        self.assertEqual(got["8-byte RDMA write rate (ib_write_bw -s 8)"], ("12.26 M/s", "met"))

    def test_missed_target(self):
        results = self.results()
        results[4]["row"]["msg_rate_mpps"] = 3.5
        got = {what: verdict for what, _, _, verdict in report.targets(results)}
        self.assertEqual(got["8-byte RDMA write rate (ib_write_bw -s 8)"], "missed")

    def test_markdown_marks_failures_and_escapes_pipes(self):
        results = self.results()
        results[3]["error"] = "weird | reason"
        text = report.markdown(results, {"cpu": "test cpu", "nproc": "2"}, "test")
        self.assertIn("failed: weird \\| reason", text)
        self.assertIn("failed: timed out after 60 s", text)
        self.assertIn("| ib_write_lat | 8 B | 0.42 | 0.47 |", text)
        self.assertIn("- nproc: 2", text)

    def test_median_round_keeps_the_median_run(self):
        runs = []
        for typical in (0.23, 0.03, 0.21):
            row = dict(perftest.parse_result(sample("perftest_write_lat_8.txt")), t_typical_us=typical)
            runs.append(_result("ib_send_lat", "softverbs", "lat", 8, row))
        runs.append(_result("ib_send_lat", "softverbs", "lat", 8, None, "timed out after 60 s"))
        kept = report.median_round(runs)
        self.assertEqual(kept["row"]["t_typical_us"], 0.21)
        self.assertEqual(kept["rounds"], [0.03, 0.21, 0.23])
        self.assertEqual(report._status(kept), "ok (median of 3 runs: 0.03-0.23)")
        ucx_runs = [_result("ucp_put_lat", "ucx", "lat", 8, dict(p50_us=v)) for v in (0.15, 0.14)]
        self.assertEqual(report.median_round(ucx_runs)["row"]["p50_us"], 0.14)  # the lower middle

    def test_median_round_of_rates_keeps_the_median_rate(self):
        runs = [_result("ib_write_bw", "softverbs", "bw", 8, dict(msg_rate_mpps=v))
                for v in (34.9, 5.8, 33.1)]
        kept = report.median_round(runs)
        self.assertEqual(kept["row"]["msg_rate_mpps"], 33.1)
        self.assertEqual(kept["rounds"], [5.8, 33.1, 34.9])
        self.assertEqual(report._status(kept), "ok (median of 3 runs: 5.80-34.90)")

    def test_ratios_are_paired_by_round(self):
        # The VM changed mode between rounds: UCX's put ran in the fast mode
        # in rounds 1 and 2, ours in round 1 only.
        ours = report.median_round([_result("ib_send_lat", "softverbs", "lat", 8, dict(t_typical_us=v))
                                    for v in (0.16, 0.46, 0.47)])
        ucx_runs = [_result("ucp_put_lat", "ucx", "lat", 8, dict(p50_us=v)) for v in (0.06, 0.06, 0.17)]
        ucx_runs.insert(2, _result("ucp_put_lat", "ucx", "lat", 8, None, "timed out"))
        ucx_runs.pop()  # three rounds, the third failed
        theirs = report.median_round(ucx_runs)
        self.assertEqual(theirs["by_round"], [0.06, 0.06, None])
        ratio, per_round = report.paired_ratio(ours, theirs, report.typical_latency)
        self.assertAlmostEqual(per_round[0], 0.16 / 0.06)
        self.assertAlmostEqual(per_round[1], 0.46 / 0.06)
        self.assertIsNone(per_round[2])
        self.assertAlmostEqual(ratio, 0.16 / 0.06)  # the lower middle of two
        self.assertEqual(report._times_by_round(ratio, per_round), "2.67x (rounds 2.67x, 7.67x, -)")
        # A ratio that two decimals would print as its goal gets a third.
        self.assertEqual(report._times_by_round(0.39 / 0.2596, [0.39 / 0.2596], 1.5), "1.502x")
        self.assertEqual(report._times_by_round(1.5, [1.5], 1.5), "1.50x")
        self.assertEqual(report._times_by_round(1.6, [], 1.5), "1.60x")
        got = {what: measured for what, measured, _, _ in report.targets16([ours, theirs])}
        self.assertEqual(got["ib_send_lat 8 B / UCX put latency (medians)"],
                         "2.67x (rounds 2.67x, 7.67x, -)")
        # UCX's active message, two-sided as a SEND: an info row, paired alike.
        am = report.median_round([_result("ucp_am_lat", "ucx", "lat", 8, dict(p50_us=v))
                                  for v in (0.14, 0.59, 0.52)])
        got = {what: (measured, verdict) for what, measured, _, verdict in report.targets16([ours, am])}
        self.assertEqual(got["(info) ib_send_lat 8 B / UCX active-message latency (medians)"],
                         ("0.90x (rounds 1.14x, 0.78x, 0.90x)", "-"))
        # One run each (no rounds): the ratio of the figures shown.
        one = _result("ib_send_lat", "softverbs", "lat", 8, dict(t_typical_us=0.3))
        ucx_one = _result("ucp_put_lat", "ucx", "lat", 8, dict(p50_us=0.1))
        ratio, per_round = report.paired_ratio(one, ucx_one, report.typical_latency)
        self.assertAlmostEqual(ratio, 3.0)
        self.assertEqual(per_round, [])

    def test_mpi_rows_in_rounds_keep_the_median_bandwidth_and_pair_their_ratio(self):
        ours = report.median_round([_result("mpi_pingpong", "mpi-softverbs", "bw", 4 << 20,
                                            dict(bw_mib_s=v)) for v in (25000.0, 2500.0, 24000.0)])
        vader = report.median_round([_result("mpi_pingpong_vader", "mpi-shm", "bw", 4 << 20,
                                             dict(bw_mib_s=v)) for v in (11000.0, 3000.0, 12000.0)])
        self.assertEqual(ours["row"]["bw_mib_s"], 24000.0)
        self.assertEqual(report._status(ours), "ok (median of 3 runs: 2,500-25,000)")
        got = {what: measured for what, measured, _, _ in report.targets16([ours, vader])}
        # Rounds 25000/11000, 2500/3000, 24000/12000.
        self.assertEqual(got["MPI ping-pong 4 MiB softverbs / vader"],
                         "2.00x (rounds 2.27x, 0.83x, 2.00x)")

    def test_median_round_of_failed_runs_is_the_first_failure(self):
        runs = [_result("ib_send_lat", "softverbs", "lat", 8, None, "exit 1: first"),
                _result("ib_send_lat", "softverbs", "lat", 8, None, "exit 1: second")]
        kept = report.median_round(runs)
        self.assertEqual(kept["error"], "exit 1: first")
        self.assertEqual(report._status(kept), "failed: exit 1: first")

    def test_plot_with_failures(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib not installed (use /usr/bin/python3)")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.png")
            report.plot(self.results(), path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            report.plot([], path)  # nothing measured: still a picture


def _probed(result, before, after):
    result["line_ns"] = [before, after]
    return result


class VmModes(unittest.TestCase):
    def test_line_probe_output(self):
        self.assertEqual(report.parse_line_probe("line_one_way_ns 51.3\n"), 51.3)
        self.assertIsNone(report.parse_line_probe(""))
        self.assertIsNone(report.parse_line_probe("line_probe: cannot pin a thread to CPU 1\n"))

    def test_a_runs_mode_is_what_both_probes_say(self):
        run = _result("ib_send_bw", "softverbs", "bw", 8, dict(msg_rate_mpps=5.0))
        self.assertIsNone(report.vm_mode(run))  # not probed
        self.assertEqual(report.vm_mode(_probed(dict(run), 51.0, 60.0)), "shared")
        self.assertEqual(report.vm_mode(_probed(dict(run), 260.0, 275.0)), "apart")
        self.assertEqual(report.vm_mode(_probed(dict(run), 51.0, 260.0)), "mixed")
        self.assertIsNone(report.vm_mode(_probed(dict(run), None, 260.0)))

    def rounds(self):
        # Three rounds: both shared; softverbs apart and UCX shared; both apart.
        ours = report.median_round([
            _probed(_result("ib_send_lat", "softverbs", "lat", 8, dict(t_typical_us=v)), *p)
            for v, p in ((0.17, (50, 52)), (0.38, (260, 262)), (0.37, (258, 270)))])
        theirs = report.median_round([
            _probed(_result("ucp_put_lat", "ucx", "lat", 8, dict(p50_us=v)), *p)
            for v, p in ((0.06, (51, 50)), (0.06, (55, 53)), (0.26, (261, 259)))])
        rate = report.median_round([
            _probed(_result("ib_send_bw", "softverbs", "bw", 8, dict(msg_rate_mpps=v)), *p)
            for v, p in ((10.8, (50, 51)), (5.2, (262, 259)), (5.3, (50, 262)))])
        return ours, theirs, rate

    def test_rounds_name_their_modes(self):
        ours, theirs, _ = self.rounds()
        self.assertEqual(ours["modes_by_round"], ["shared", "apart", "apart"])
        self.assertEqual(report.round_modes(ours, theirs), ["shared", "apart/shared", "apart"])
        got = {what: measured for what, measured, _, _ in report.targets16([ours, theirs])}
        self.assertEqual(got["ib_send_lat 8 B / UCX put latency (medians)"],
                         "2.83x (rounds 2.83x shared, 6.33x apart/shared, 1.42x apart)")
        # Runs not probed: no names.
        plain = [dict(r, line_ns=None) for r in (ours, theirs)]
        for r in plain:
            r.pop("modes_by_round")
        got = {what: measured for what, measured, _, _ in report.targets16(plain)}
        self.assertEqual(got["ib_send_lat 8 B / UCX put latency (medians)"],
                         "2.83x (rounds 2.83x, 6.33x, 1.42x)")

    def test_targets_by_mode_count_only_rounds_wholly_in_one_mode(self):
        ours, theirs, rate = self.rounds()
        rows = {what: (goal, cells) for what, goal, cells in report.by_vm_mode([ours, theirs, rate])}
        goal, cells = rows["ib_send_lat 8 B / UCX put latency"]
        self.assertEqual(goal, "<= 1.5x")
        self.assertAlmostEqual(cells["shared"][0], 0.17 / 0.06)
        self.assertEqual(cells["shared"][1:3], (1, "missed"))
        self.assertAlmostEqual(cells["apart"][0], 0.37 / 0.26)  # the mixed round left out
        self.assertEqual(cells["apart"][1:3], (1, "met"))
        _, cells = rows["ib_send_bw 8 B rate"]
        self.assertEqual(cells["shared"][:3], (10.8, 1, "met"))
        self.assertEqual(cells["apart"][:3], (5.2, 1, "missed"))  # round 3 was mixed
        _, cells = rows["ib_send_lat, 8 B (typical)"]
        self.assertEqual(cells["apart"][:3], (0.37, 2, "met"))  # 0.37 and 0.38: the lower middle
        self.assertNotIn("ib_write_bw 8 B rate / UCX put rate", rows)  # not measured
        text = "\n".join(report.by_vm_mode_table([ours, theirs, rate]))
        self.assertIn("| ib_send_bw 8 B rate | >= 10 M/s | 10.80 M/s (1 round): met | "
                      "5.20 M/s (1 round): missed |", text)
        self.assertIn("| ib_send_lat, 8 B (typical) | <= 0.5 us | 0.17 us (1 round): met | "
                      "0.37 us (2 rounds): met |", text)
        self.assertIn(text, report.markdown([ours, theirs, rate, _result("reg_mr", "reg_mr", "bw", 4096)],
                                            {}, "test"))
        self.assertEqual(report.by_vm_mode_table([_result("ib_send_bw", "softverbs", "bw", 8,
                                                          dict(msg_rate_mpps=5.0))]), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
