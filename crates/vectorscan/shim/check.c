/* The constants and types the Rust side declares by hand, checked against the
 * installed header at build time: a library whose ABI moved fails the build here, not
 * at run time. */
#include <stddef.h>
#include <hs/hs.h>

_Static_assert(HS_SUCCESS == 0, "HS_SUCCESS");
_Static_assert(HS_SCAN_TERMINATED == -3, "HS_SCAN_TERMINATED");
_Static_assert(HS_FLAG_CASELESS == 1, "HS_FLAG_CASELESS");
_Static_assert(HS_MODE_BLOCK == 1, "HS_MODE_BLOCK");
_Static_assert(sizeof(hs_error_t) == sizeof(int), "hs_error_t is an int");
_Static_assert(offsetof(hs_compile_error_t, message) == 0, "hs_compile_error_t.message first");
_Static_assert(offsetof(hs_compile_error_t, expression) == sizeof(char *), "hs_compile_error_t.expression second");

/* Referenced from Rust so the object is linked and the checks above are not skipped. */
int sfclab_hs_abi_checked(void)
{
    return 1;
}
