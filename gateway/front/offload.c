/* Threads for the blocking calls of event mode; design in offload.h. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "gateway/front/offload.h"

struct gw_offload {
    pthread_mutex_t lock;
    pthread_cond_t queued;
    struct gw_offload_job *head, *tail;
    bool stopping;
    pthread_t threads[GW_OFFLOAD_THREADS];
    unsigned n_threads;
};

static void *serve(void *arg)
{
    struct gw_offload *o = arg;

    pthread_mutex_lock(&o->lock);
    for (;;) {
        struct gw_offload_job *job = o->head;

        if (job == NULL) {
            if (o->stopping)
                break;
            pthread_cond_wait(&o->queued, &o->lock);
            continue;
        }
        o->head = job->next;
        if (o->head == NULL)
            o->tail = NULL;
        pthread_mutex_unlock(&o->lock);
        job->run(job);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

struct gw_offload *gw_offload_new(void)
{
    struct gw_offload *o = calloc(1, sizeof *o);

    if (o == NULL)
        return NULL;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->queued, NULL);
    while (o->n_threads < GW_OFFLOAD_THREADS &&
           pthread_create(&o->threads[o->n_threads], NULL, serve, o) == 0)
        o->n_threads++;
    if (o->n_threads == 0) {
        gw_offload_free(o);
        return NULL;
    }
    return o;
}

void gw_offload_free(struct gw_offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->lock);
    o->stopping = true;
    pthread_cond_broadcast(&o->queued);
    pthread_mutex_unlock(&o->lock);
    for (unsigned i = 0; i < o->n_threads; i++)
        pthread_join(o->threads[i], NULL);
    pthread_cond_destroy(&o->queued);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

void gw_offload_queue(struct gw_offload *o, struct gw_offload_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&o->lock);
    if (o->tail != NULL)
        o->tail->next = job;
    else
        o->head = job;
    o->tail = job;
    pthread_cond_signal(&o->queued);
    pthread_mutex_unlock(&o->lock);
}
