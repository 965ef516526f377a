/* DPDK's rte_meter (RFC 2697 srTCM, RFC 2698 trTCM) timed alone: sfclab's peer for the
 * qos NF's meters. Debian's dpdk-test has no meter_perf_autotest, and rte_meter's checks
 * are inline functions of its header, so sfclab compiles this against libdpdk-dev.
 * Prints one line per check: "<meter>-<mode> <TSC cycles per packet> <green> <yellow> <red>".
 * Time advances 40 TSC cycles per 64-byte packet (a few Gbit/s), so the buckets are
 * refilled, spent and overflowed as under load. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_meter.h>

#define STEP 40

static volatile uint32_t sink;

int main(int argc, char **argv)
{
	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	uint64_t packets = 20000000;
	const char *n = getenv("SFCLAB_METER_PACKETS");
	if (n != NULL)
		packets = strtoull(n, NULL, 10);

	struct rte_meter_srtcm_params sp = {.cir = 250000000, .cbs = 16384, .ebs = 16384};
	struct rte_meter_trtcm_params tp = {.cir = 250000000, .pir = 500000000, .cbs = 16384, .pbs = 32768};
	struct rte_meter_srtcm_profile spp;
	struct rte_meter_trtcm_profile tpp;
	if (rte_meter_srtcm_profile_config(&spp, &sp) != 0 || rte_meter_trtcm_profile_config(&tpp, &tp) != 0) {
		fprintf(stderr, "meter profile config failed\n");
		return 1;
	}
	for (int mode = 0; mode < 4; mode++) {
		struct rte_meter_srtcm sm;
		struct rte_meter_trtcm tm;
		rte_meter_srtcm_config(&sm, &spp);
		rte_meter_trtcm_config(&tm, &tpp);
		uint64_t colours[3] = {0, 0, 0};
		uint64_t now = rte_rdtsc();
		uint64_t t0 = rte_rdtsc();
		for (uint64_t i = 0; i < packets; i++) {
			enum rte_color c;
			now += STEP;
			switch (mode) {
			case 0: c = rte_meter_srtcm_color_blind_check(&sm, &spp, now, 64); break;
			case 1: c = rte_meter_srtcm_color_aware_check(&sm, &spp, now, 64, (enum rte_color)(i % 3)); break;
			case 2: c = rte_meter_trtcm_color_blind_check(&tm, &tpp, now, 64); break;
			default: c = rte_meter_trtcm_color_aware_check(&tm, &tpp, now, 64, (enum rte_color)(i % 3)); break;
			}
			colours[c]++;
		}
		uint64_t t1 = rte_rdtsc();
		static const char *names[] = {"srtcm-blind", "srtcm-aware", "trtcm-blind", "trtcm-aware"};
		printf("%s %.3f %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", names[mode], (double)(t1 - t0) / (double)packets,
		       colours[0], colours[1], colours[2]);
		sink += (uint32_t)colours[0];
	}
	rte_eal_cleanup();
	return 0;
}
