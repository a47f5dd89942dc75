/* Idle keep-alive connections held outside libmicrohttpd; design in park.h. */
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "gateway/front/park.h"

struct parked {
    int fd;
    int64_t deadline_ns;
    void *owner;
    struct parked *prev, *next; /* oldest first */
};

struct gw_park {
    int epoll_fd;
    size_t count;
    struct parked *oldest, *newest;
};

struct gw_park *gw_park_new(void)
{
    struct gw_park *park = calloc(1, sizeof *park);

    if (park == NULL)
        return NULL;
    park->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (park->epoll_fd < 0) {
        free(park);
        return NULL;
    }
    return park;
}

void gw_park_free(struct gw_park *park)
{
    if (park == NULL)
        return;
    close(park->epoll_fd);
    free(park);
}

int gw_park_fd(const struct gw_park *park)
{
    return park->epoll_fd;
}

size_t gw_park_count(const struct gw_park *park)
{
    return park->count;
}

int gw_park_add(struct gw_park *park, int fd, int64_t deadline_ns, void *owner)
{
    struct parked *p = malloc(sizeof *p);
    struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP};

    if (p == NULL)
        return -1;
    event.data.ptr = p;
    if (epoll_ctl(park->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        free(p);
        return -1;
    }
    p->fd = fd;
    p->deadline_ns = deadline_ns;
    p->owner = owner;
    p->next = NULL;
    p->prev = park->newest;
    if (park->newest != NULL)
        park->newest->next = p;
    else
        park->oldest = p;
    park->newest = p;
    park->count++;
    return 0;
}

/* Takes `p` out of the park: its owner, and its socket in `*fd`. */
static void *take(struct gw_park *park, struct parked *p, int *fd)
{
    void *owner = p->owner;

    epoll_ctl(park->epoll_fd, EPOLL_CTL_DEL, p->fd, NULL);
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        park->oldest = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    else
        park->newest = p->prev;
    park->count--;
    *fd = p->fd;
    free(p);
    return owner;
}

void *gw_park_take_ready(struct gw_park *park, int *fd)
{
    struct epoll_event event;

    if (park->count == 0 || epoll_wait(park->epoll_fd, &event, 1, 0) != 1)
        return NULL;
    return take(park, event.data.ptr, fd);
}

void *gw_park_take_expired(struct gw_park *park, int64_t now_ns, int *fd)
{
    if (park->oldest == NULL || park->oldest->deadline_ns > now_ns)
        return NULL;
    return take(park, park->oldest, fd);
}
