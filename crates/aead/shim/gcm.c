/* AES-GCM through Intel's ipsec-mb, as plain functions: the library's GCM calls are
 * macros over function pointers in its manager, which Rust cannot call without
 * copying the manager's layout. One manager per key: it picks the best code the CPU
 * runs (SSE, AVX2, AVX-512, VAES) once, and holds nothing a call changes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <intel-ipsec-mb.h>

struct sfclab_gcm {
    struct gcm_key_data key; /* first: the allocation's 64-byte alignment is its own */
    IMB_MGR *mgr;
    int bits;
};

struct sfclab_gcm *sfclab_gcm_new(const uint8_t *key, size_t key_len)
{
    if (key_len != 16 && key_len != 32)
        return NULL;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(struct sfclab_gcm)) != 0)
        return NULL;
    struct sfclab_gcm *g = mem;
    memset(g, 0, sizeof(*g));
    g->mgr = alloc_mb_mgr(0);
    if (g->mgr == NULL) {
        free(g);
        return NULL;
    }
    init_mb_mgr_auto(g->mgr, NULL);
    if (imb_get_errno(g->mgr) != 0) {
        free_mb_mgr(g->mgr);
        free(g);
        return NULL;
    }
    g->bits = key_len == 16 ? 128 : 256;
    if (g->bits == 128)
        IMB_AES128_GCM_PRE(g->mgr, key, &g->key);
    else
        IMB_AES256_GCM_PRE(g->mgr, key, &g->key);
    return g;
}

void sfclab_gcm_free(struct sfclab_gcm *g)
{
    if (g == NULL)
        return;
    free_mb_mgr(g->mgr);
    /* The expanded key is secret. */
    memset(&g->key, 0, sizeof(g->key));
    free(g);
}

/* Which code the manager picked: "avx512", "avx2", "avx", "sse" or "unknown". */
const char *sfclab_gcm_arch(const struct sfclab_gcm *g)
{
    switch (g->mgr->used_arch) {
    case IMB_ARCH_AVX512: return "avx512";
    case IMB_ARCH_AVX2: return "avx2";
    case IMB_ARCH_AVX: return "avx";
    case IMB_ARCH_SSE: return "sse";
    default: return "unknown";
    }
}

void sfclab_gcm_seal(const struct sfclab_gcm *g, const uint8_t iv[12], const uint8_t *aad, size_t aad_len,
                     uint8_t *buf, size_t len, uint8_t tag[16])
{
    struct gcm_context_data ctx;
    if (g->bits == 128)
        IMB_AES128_GCM_ENC(g->mgr, &g->key, &ctx, buf, buf, len, iv, aad, aad_len, tag, 16);
    else
        IMB_AES256_GCM_ENC(g->mgr, &g->key, &ctx, buf, buf, len, iv, aad, aad_len, tag, 16);
}

/* Decrypts `buf` in place and checks `tag` in constant time: 1 when it matches. */
int sfclab_gcm_open(const struct sfclab_gcm *g, const uint8_t iv[12], const uint8_t *aad, size_t aad_len,
                    uint8_t *buf, size_t len, const uint8_t tag[16])
{
    struct gcm_context_data ctx;
    uint8_t computed[16];
    if (g->bits == 128)
        IMB_AES128_GCM_DEC(g->mgr, &g->key, &ctx, buf, buf, len, iv, aad, aad_len, computed, 16);
    else
        IMB_AES256_GCM_DEC(g->mgr, &g->key, &ctx, buf, buf, len, iv, aad, aad_len, computed, 16);
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= computed[i] ^ tag[i];
    return diff == 0;
}
