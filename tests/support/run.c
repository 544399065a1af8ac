/* Test support: process runner and scratch folders. */
#include "support/run.h"

#include "core/core.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            char *p = realloc(buf, cap);
            if (!p)
                break;
            buf = p;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = 0;
    return buf;
}

void cp_run_argv(struct cp_run *r, char *const argv[])
{
    memset(r, 0, sizeof *r);
    r->exit_code = -1;
    char out_tmpl[] = "/tmp/cp_run_outXXXXXX";
    char err_tmpl[] = "/tmp/cp_run_errXXXXXX";
    int fo = mkstemp(out_tmpl), fe = mkstemp(err_tmpl);
    if (fo < 0 || fe < 0)
        return;
    unlink(out_tmpl);
    unlink(err_tmpl);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (pid > 0 && WIFEXITED(status))
        r->exit_code = WEXITSTATUS(status);
    else if (pid > 0 && WIFSIGNALED(status))
        r->signal = WTERMSIG(status);
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    r->out = slurp_fd(fo);
    r->err = slurp_fd(fe);
    close(fo);
    close(fe);
}

void cp_run_cli(struct cp_run *r, ...)
{
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)CP_CLI;
    va_list ap;
    va_start(ap, r);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 63)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    cp_run_argv(r, argv);
}

void cp_run_release(struct cp_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *cp_scratch_dir(void)
{
    char tmpl[] = "/tmp/cannprof-test.XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

void cp_scratch_remove(const char *dir)
{
    if (!dir || strncmp(dir, "/tmp/", 5) != 0 || strstr(dir, ".."))
        return;
    char *argv[] = {(char *)"/bin/rm", (char *)"-rf", (char *)dir, NULL};
    struct cp_run r;
    cp_run_argv(&r, argv);
    cp_run_release(&r);
}

const char *cp_example_model(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/examples/models/%s.onnx", CP_SOURCE_DIR, name);
    return buf;
}

char *cp_run_shell(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        cp_buf_append(&b, chunk, n);
    int rc = pclose(p);
    cp_buf_puts(&b, "");
    if (rc != 0 || cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}
