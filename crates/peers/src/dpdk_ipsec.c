/* DPDK's ESP tunnel mode, outbound, timed per packet: sfclab's peer for the esp-encrypt
 * NF. librte_ipsec frames each packet (outer header from the SA's template, ESP header,
 * IV, padding and trailer, the crypto op) in rte_ipsec_pkt_crypto_prepare; the AES-GCM
 * PMD (crypto_aesni_gcm, or crypto_openssl) encrypts through rte_cryptodev's enqueue and
 * dequeue; rte_ipsec_pkt_process finishes them; the outer IPv4 checksum is then computed
 * in software, as dpdk-ipsec-secgw does for a port without checksum offload. That is
 * dpdk-ipsec-secgw's outbound path with a lookaside-none session, less its I/O and its
 * SPD lookup (one SA, no ACL), the same work as the NF's per packet and a little less.
 *
 * Per size: bursts of 32 frames (Ethernet, IPv4, UDP; the datagram `bytes` long) are
 * written into their mbufs untimed, as a generator leaves them in cache for the NF; the
 * TSC is read around prepare, enqueue, dequeue, process and checksum. The crypto ops are
 * allocated once and reused (secgw keeps one in each mbuf's private area).
 * Prints one line per size: "esp-encrypt <bytes> <TSC cycles per packet> <packets>
 * <failed> <PMD>"; every packet is checked to leave as long as ESP makes it. Before them,
 * "frame <hex>" and "packet <hex>": the run's first frame and what ESP made of it.
 * The SA: SPI 0x1000, AES-128-GCM key 4c80cdefbb5d10da906ac73c3613a634, salt 2e443b68,
 * tunnel 192.0.2.1 to 192.0.2.2, no ESN. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <rte_cryptodev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_ipsec.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#define BURST 32
#define IV_OFFSET (sizeof(struct rte_crypto_op) + sizeof(struct rte_crypto_sym_op))
#define SPI 0x1000

static void print_hex(const char *label, const uint8_t *b, uint32_t n)
{
	printf("%s ", label);
	for (uint32_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

static int fail(const char *what)
{
	fprintf(stderr, "%s\n", what);
	return 1;
}

/* An Ethernet header and an IPv4 header of a datagram `bytes` long carrying `proto`. */
static struct rte_ipv4_hdr *write_eth_ipv4(uint8_t *f, uint32_t bytes, uint8_t proto, uint32_t src, uint32_t dst)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	memset(eth, 0, sizeof(*eth));
	eth->dst_addr.addr_bytes[0] = 0x02;
	eth->src_addr.addr_bytes[0] = 0x02;
	eth->src_addr.addr_bytes[5] = 0x01;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16(bytes);
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	return ip;
}

/* A frame of `bytes` (at least 28) of IPv4 datagram, UDP inside, after its Ethernet header. */
static void write_frame(uint8_t *f, uint32_t bytes)
{
	struct rte_ipv4_hdr *ip = write_eth_ipv4(f, bytes, IPPROTO_UDP, RTE_IPV4(10, 0, 0, 1), RTE_IPV4(10, 0, 0, 2));
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	udp->src_port = rte_cpu_to_be_16(1024);
	udp->dst_port = rte_cpu_to_be_16(1024);
	udp->dgram_len = rte_cpu_to_be_16(bytes - sizeof(*ip));
	udp->dgram_cksum = 0;
	memset(udp + 1, 0xab, bytes - sizeof(*ip) - sizeof(*udp));
}

int main(int argc, char **argv)
{
	if (rte_eal_init(argc, argv) < 0)
		return fail("rte_eal_init failed");
	uint64_t packets = 2000000;
	const char *n = getenv("SFCLAB_IPSEC_PACKETS");
	if (n != NULL)
		packets = strtoull(n, NULL, 10);
	const char *sizes = getenv("SFCLAB_IPSEC_SIZES");
	if (sizes == NULL)
		sizes = "64,512,1420";
	if (rte_cryptodev_count() == 0)
		return fail("no crypto device (pass --vdev crypto_aesni_gcm0)");
	const uint8_t dev = 0;
	struct rte_cryptodev_info info;
	rte_cryptodev_info_get(dev, &info);

	struct rte_mempool *mbufs = rte_pktmbuf_pool_create("mbufs", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	struct rte_mempool *ops = rte_crypto_op_pool_create("ops", RTE_CRYPTO_OP_TYPE_SYMMETRIC, 255, 0,
							    16, 0);
	unsigned sess_size = rte_cryptodev_sym_get_private_session_size(dev);
	struct rte_mempool *sessions = rte_cryptodev_sym_session_pool_create("sessions", 15, sess_size, 0, 0, 0);
	if (mbufs == NULL || ops == NULL || sessions == NULL)
		return fail("mempool creation failed");

	struct rte_cryptodev_config conf = {.socket_id = 0, .nb_queue_pairs = 1};
	struct rte_cryptodev_qp_conf qp = {.nb_descriptors = 2048, .mp_session = sessions};
	if (rte_cryptodev_configure(dev, &conf) < 0 || rte_cryptodev_queue_pair_setup(dev, 0, &qp, 0) < 0 ||
	    rte_cryptodev_start(dev) < 0)
		return fail("crypto device setup failed");

	/* AES-128-GCM, a 4-byte salt after the key (RFC 4106), 8-byte AAD (no ESN), 16-byte tag. */
	static const uint8_t key[16] = {0x4c, 0x80, 0xcd, 0xef, 0xbb, 0x5d, 0x10, 0xda,
					0x90, 0x6a, 0xc7, 0x3c, 0x36, 0x13, 0xa6, 0x34};
	struct rte_crypto_sym_xform aead = {
		.type = RTE_CRYPTO_SYM_XFORM_AEAD,
		.aead = {
			.op = RTE_CRYPTO_AEAD_OP_ENCRYPT,
			.algo = RTE_CRYPTO_AEAD_AES_GCM,
			.key = {.data = key, .length = sizeof(key)},
			.iv = {.offset = IV_OFFSET, .length = 12},
			.digest_length = 16,
			.aad_length = 8,
		},
	};
	void *ses = rte_cryptodev_sym_session_create(dev, &aead, sessions);
	if (ses == NULL)
		return fail("crypto session creation failed");

	/* The tunnel header template: the Ethernet header the frame keeps, the outer IPv4. */
	uint8_t hdr[RTE_ETHER_HDR_LEN + sizeof(struct rte_ipv4_hdr)];
	write_eth_ipv4(hdr, 0, IPPROTO_ESP, RTE_IPV4(192, 0, 2, 1), RTE_IPV4(192, 0, 2, 2));
	struct rte_ipsec_sa_prm prm;
	memset(&prm, 0, sizeof(prm));
	prm.ipsec_xform.spi = SPI;
	/* The salt as its bytes lie in memory, as dpdk-ipsec-secgw reads it from its key. */
	prm.ipsec_xform.salt = rte_cpu_to_be_32(0x2e443b68);
	prm.ipsec_xform.direction = RTE_SECURITY_IPSEC_SA_DIR_EGRESS;
	prm.ipsec_xform.proto = RTE_SECURITY_IPSEC_SA_PROTO_ESP;
	prm.ipsec_xform.mode = RTE_SECURITY_IPSEC_SA_MODE_TUNNEL;
	prm.ipsec_xform.tunnel.type = RTE_SECURITY_IPSEC_TUNNEL_IPV4;
	/* The NF carries the inner DSCP and ECN out (RFC 4301 5.1.2.1, RFC 6040). */
	prm.ipsec_xform.options.copy_dscp = 1;
	prm.ipsec_xform.options.ecn = 1;
	prm.crypto_xform = &aead;
	prm.tun.hdr_len = sizeof(hdr);
	prm.tun.hdr_l3_off = RTE_ETHER_HDR_LEN;
	prm.tun.next_proto = IPPROTO_IPIP;
	prm.tun.hdr = hdr;
	int sa_size = rte_ipsec_sa_size(&prm);
	if (sa_size <= 0)
		return fail("rte_ipsec_sa_size failed");
	struct rte_ipsec_session ss;
	memset(&ss, 0, sizeof(ss));
	ss.sa = rte_zmalloc(NULL, sa_size, RTE_CACHE_LINE_SIZE);
	ss.type = RTE_SECURITY_ACTION_TYPE_NONE;
	ss.crypto.ses = ses;
	ss.crypto.dev_id = dev;
	if (ss.sa == NULL)
		return fail("no memory for the SA");
	int rc = rte_ipsec_sa_init(ss.sa, &prm, sa_size);
	if (rc < 0) {
		fprintf(stderr, "rte_ipsec_sa_init: %s\n", strerror(-rc));
		return 1;
	}
	rc = rte_ipsec_session_prepare(&ss);
	if (rc != 0) {
		fprintf(stderr, "rte_ipsec_session_prepare: %s\n", strerror(-rc));
		return 1;
	}

	struct rte_mbuf *mb[BURST];
	struct rte_crypto_op *cop[BURST], *done[BURST];
	if (rte_pktmbuf_alloc_bulk(mbufs, mb, BURST) != 0 ||
	    rte_crypto_op_bulk_alloc(ops, RTE_CRYPTO_OP_TYPE_SYMMETRIC, cop, BURST) != BURST)
		return fail("mbuf or op allocation failed");

	int shown = 0;
	char *list = strdup(sizes);
	for (char *s = strtok(list, ","); s != NULL; s = strtok(NULL, ",")) {
		uint32_t bytes = (uint32_t)strtoul(s, NULL, 10);
		if (bytes < sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr) || bytes > 1500)
			return fail("sizes are IPv4 datagrams of 28 to 1500 bytes");
		uint32_t sealed = RTE_ALIGN_CEIL(bytes + 2, 4);
		uint32_t expect = RTE_ETHER_HDR_LEN + 20 + 8 + 8 + sealed + 16;
		uint8_t frame[RTE_ETHER_HDR_LEN + 1500];
		write_frame(frame, bytes);
		uint64_t cycles = 0, sent = 0, failed = 0;
		while (sent < packets) {
			for (int i = 0; i < BURST; i++) {
				rte_pktmbuf_reset(mb[i]);
				uint8_t *f = (uint8_t *)rte_pktmbuf_append(mb[i], RTE_ETHER_HDR_LEN + bytes);
				memcpy(f, frame, RTE_ETHER_HDR_LEN + bytes);
				mb[i]->l2_len = RTE_ETHER_HDR_LEN;
			}
			uint64_t t0 = rte_rdtsc_precise();
			uint16_t k = rte_ipsec_pkt_crypto_prepare(&ss, mb, cop, BURST);
			uint16_t in = rte_cryptodev_enqueue_burst(dev, 0, cop, k);
			uint16_t out = 0;
			while (out < in)
				out += rte_cryptodev_dequeue_burst(dev, 0, done + out, in - out);
			for (uint16_t i = 0; i < out; i++)
				if (done[i]->status != RTE_CRYPTO_OP_STATUS_SUCCESS)
					done[i]->sym->m_src->ol_flags |= RTE_MBUF_F_RX_SEC_OFFLOAD_FAILED;
			uint16_t ok = rte_ipsec_pkt_process(&ss, mb, out);
			for (uint16_t i = 0; i < ok; i++) {
				struct rte_ipv4_hdr *h = rte_pktmbuf_mtod_offset(mb[i], struct rte_ipv4_hdr *,
										 RTE_ETHER_HDR_LEN);
				h->hdr_checksum = 0;
				h->hdr_checksum = rte_ipv4_cksum(h);
			}
			cycles += rte_rdtsc_precise() - t0;
			if (!shown && ok > 0) {
				/* The run's first packet (sequence number 1), in and out, for a check
				 * against another ESP implementation. */
				print_hex("frame", frame, RTE_ETHER_HDR_LEN + bytes);
				print_hex("packet", rte_pktmbuf_mtod(mb[0], uint8_t *), rte_pktmbuf_data_len(mb[0]));
				shown = 1;
			}
			for (uint16_t i = 0; i < ok; i++)
				failed += rte_pktmbuf_pkt_len(mb[i]) != expect;
			failed += BURST - ok;
			sent += BURST;
		}
		printf("esp-encrypt %" PRIu32 " %.3f %" PRIu64 " %" PRIu64 " %s\n", bytes,
		       (double)cycles / (double)sent, sent, failed, info.driver_name);
	}
	free(list);
	rte_cryptodev_stop(dev);
	rte_eal_cleanup();
	return 0;
}
