/* Notes every file the process opens for reading, one path per line, in the file that the
 * variable OPEN_LOG names: preloaded (LD_PRELOAD) into `cudyn compile` by tests/include_search.rs,
 * it sees NVRTC's own opens (NVRTC imports open, fopen and fopen64 from the C library), with
 * no ptrace and no tool beyond a C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef FILE *(*fopen_fn)(const char *, const char *);

static void note(const char *path) {
    const char *log = getenv("OPEN_LOG");
    if (!log || strcmp(path, log) == 0) return;
    open_fn real_open = (open_fn)dlsym(RTLD_NEXT, "open");
    int fd = real_open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    size_t length = strlen(path);
    char line[4096];
    if (length + 1 < sizeof line) {
        memcpy(line, path, length);
        line[length] = '\n';
        /* One write per line: O_APPEND keeps lines of several threads whole. */
        ssize_t written = write(fd, line, length + 1);
        (void)written;
    }
    close(fd);
}

static int reading(int flags) {
    return (flags & O_ACCMODE) == O_RDONLY && !(flags & O_DIRECTORY);
}

static mode_t mode_of(int flags, va_list arguments) {
    return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
}

#define OPEN(name)                                                        \
    int name(const char *path, int flags, ...) {                          \
        va_list arguments;                                                \
        va_start(arguments, flags);                                       \
        mode_t mode = mode_of(flags, arguments);                          \
        va_end(arguments);                                                \
        int fd = ((open_fn)dlsym(RTLD_NEXT, #name))(path, flags, mode);   \
        if (fd >= 0 && reading(flags)) note(path);                        \
        return fd;                                                        \
    }

#define OPENAT(name)                                                              \
    int name(int dir, const char *path, int flags, ...) {                         \
        va_list arguments;                                                        \
        va_start(arguments, flags);                                               \
        mode_t mode = mode_of(flags, arguments);                                  \
        va_end(arguments);                                                        \
        int fd = ((openat_fn)dlsym(RTLD_NEXT, #name))(dir, path, flags, mode);    \
        if (fd >= 0 && reading(flags) && (dir == AT_FDCWD || path[0] == '/'))     \
            note(path);                                                           \
        return fd;                                                                \
    }

#define FOPEN(name)                                                        \
    FILE *name(const char *path, const char *mode) {                       \
        FILE *file = ((fopen_fn)dlsym(RTLD_NEXT, #name))(path, mode);      \
        if (file && mode[0] == 'r' && !strchr(mode, '+')) note(path);      \
        return file;                                                       \
    }

OPEN(open)
OPEN(open64)
OPENAT(openat)
OPENAT(openat64)
FOPEN(fopen)
FOPEN(fopen64)
