/* The pod sandbox ("pause") container of the test node: holds the pod's namespaces and exits on SIGTERM or
 * SIGINT. Built static, alone in an image, because the registry's pause image cannot be pulled here. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void leave(int signum) { (void)signum; _exit(0); }

int main(void) {
    signal(SIGTERM, leave);
    signal(SIGINT, leave);
    for (;;) pause();
}
