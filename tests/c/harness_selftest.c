/* harness_selftest.c: a program built on check.h whose tests pass, skip or fail on request, so that
 * tests/c/check_harness.cmake can check the exit status ctest sees (a file whose GPU
 * tests were skipped was reported "Passed"). argv[1]: any of "pass", "skip", "fail", in order. */
#include "check.h"

static void test_pass(void) { CHECK(1 + 1 == 2); }
static void test_skip(void) { SKIP("the reason given by the test (%d)", 42); }
static void test_fail(void) { CHECK(1 + 1 == 3); }

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "pass") == 0)
            RUN(test_pass);
        else if (strcmp(argv[i], "skip") == 0)
            RUN(test_skip);
        else if (strcmp(argv[i], "fail") == 0)
            RUN(test_fail);
    }
    return SUMMARY();
}
