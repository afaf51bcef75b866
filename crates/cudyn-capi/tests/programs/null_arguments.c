/* Null pointers, made-up handles and double frees are errors with a message, never crashes.
 * Needs no GPU. Exit status 0 when every check holds; each failed check is printed. */
#include <stdio.h>
#include <string.h>

#include "cudyn.h"

static int failures = 0;

/* Checks that `status` is `expected` and that the message mentions `words`. */
static void expect(const char *call, cudyn_status status, cudyn_status expected,
                   const char *words) {
    if (status != expected) {
        printf("FAIL %s: %s, expected %s (%s)\n", call, cudyn_status_name(status),
               cudyn_status_name(expected), cudyn_last_error());
        failures++;
    } else if (words != NULL && strstr(cudyn_last_error(), words) == NULL) {
        printf("FAIL %s: the message \"%s\" does not mention \"%s\"\n", call, cudyn_last_error(),
               words);
        failures++;
    }
}

#define EXPECT(call, expected, words) expect(#call, call, expected, words)

int main(void) {
    const cudyn_status invalid = CUDYN_ERROR_INVALID_ARGUMENT;
    cudyn_library *library = NULL;
    cudyn_kernel *kernel = NULL;
    cudyn_buffer *buffer = NULL;
    cudyn_stream *stream = NULL;
    size_t count = 0;
    void *raw = NULL;
    cudyn_param_layout layout;
    cudyn_launch_config config = {{1, 1, 1}, {1, 1, 1}, 0, NULL};

    if (strcmp(cudyn_last_error(), "") != 0) {
        printf("FAIL: a message before any failure: %s\n", cudyn_last_error());
        failures++;
    }
    EXPECT(cudyn_toolchain_report(NULL), invalid, "`report` is a null pointer");
    EXPECT(cudyn_device_count(NULL), invalid, "`count`");
    EXPECT(cudyn_library_load_file(NULL, NULL, &library), invalid, "`path`");
    EXPECT(cudyn_library_load_file("k.cubin", NULL, NULL), invalid, "`library`");
    EXPECT(cudyn_library_load_data(NULL, 16, NULL, &library), invalid, "`image`");
    EXPECT(cudyn_library_compile(NULL, NULL, NULL, &library), invalid, "`source`");
    cudyn_compile_options options = {0};
    options.option_count = 2; /* and no array */
    EXPECT(cudyn_library_compile("", &options, NULL, &library), invalid, "`options`");
    cudyn_load_options load = cudyn_load_options_default();
    load.backend = 7;
    EXPECT(cudyn_library_load_data("x", 1, &load, &library), invalid, "backend 7");
    load = cudyn_load_options_default();
    load.optimization_level = -2;
    EXPECT(cudyn_library_load_data("x", 1, &load, &library), invalid, "optimization_level -2");
    load = cudyn_load_options_default();
    load.sharing = 3;
    EXPECT(cudyn_library_load_data("x", 1, &load, &library), invalid, "sharing 3");
    if (library != NULL) {
        printf("FAIL: a failed load wrote its out-pointer\n");
        failures++;
    }
    EXPECT(cudyn_library_kernel(NULL, "saxpy", &kernel), invalid, "null pointer");
    EXPECT(cudyn_library_kernel((cudyn_library *)0x1234, "saxpy", &kernel), invalid,
           "not a live cudyn_library handle");
    EXPECT(cudyn_kernel_from_raw(NULL, &kernel), invalid, "`raw`");
    EXPECT(cudyn_kernel_param_count(NULL, &count), invalid, "cudyn_kernel");
    EXPECT(cudyn_kernel_param((cudyn_kernel *)0x99, 0, &layout), invalid, "cudyn_kernel");
    EXPECT(cudyn_kernel_raw(NULL, &raw), invalid, NULL);
    EXPECT(cudyn_launch(NULL, &config, NULL, 0, NULL), invalid, "cudyn_kernel");
    EXPECT(cudyn_stream_synchronize(NULL), invalid, "cudyn_stream");
    EXPECT(cudyn_buffer_address(NULL, NULL), invalid, "`address`");

    /* A buffer of 0 bytes needs no GPU: it checks ranges and double frees here. */
    EXPECT(cudyn_buffer_alloc(0, &buffer), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_buffer_copy_from_host(buffer, 0, NULL, 4), invalid, "`source`");
    EXPECT(cudyn_buffer_copy_to_host(buffer, 0, &count, sizeof count), invalid,
           "outside the buffer");
    EXPECT(cudyn_buffer_fill(buffer, (size_t)-1, 0, 2), invalid, "overflows");
    EXPECT(cudyn_kernel_release((cudyn_kernel *)buffer), invalid, "cudyn_kernel");
    EXPECT(cudyn_buffer_free(buffer), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_buffer_free(buffer), invalid, "freed already");

    /* Device code is checked before the driver sees it, GPU or not. */
    EXPECT(cudyn_library_load_data("garbage", 7, NULL, &library), CUDYN_ERROR_INVALID_IMAGE,
           "not device code");

    /* Freeing nothing is allowed, as with free(). */
    EXPECT(cudyn_library_unload(NULL), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_kernel_release(NULL), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_buffer_free(NULL), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_stream_destroy(NULL), CUDYN_SUCCESS, NULL);
    EXPECT(cudyn_string_free(NULL), CUDYN_SUCCESS, NULL);
    char mine[] = "not cudyn's";
    EXPECT(cudyn_string_free(mine), invalid, "not a string cudyn returned");
    (void)stream;

    if (strcmp(cudyn_status_name(CUDYN_ERROR_LAUNCH), "CUDYN_ERROR_LAUNCH") != 0 ||
        strcmp(cudyn_status_name(-5), "CUDYN_STATUS_UNKNOWN") != 0) {
        printf("FAIL: status names\n");
        failures++;
    }
    printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
