/*
 * watch: reload when the config file changes on disk.
 *
 * inotify watches the file's directory, not the file, so that every way of replacing it is
 * seen: an editor writing in place (close after write), one writing a new file and renaming
 * it over the old, and Kubernetes swapping a ConfigMap's "..data" symlink. After a change the
 * watcher waits until the file has been left alone for 200 ms (other files of the directory
 * changing meanwhile do not count), then raises SIGHUP, so a reload runs where every other
 * one does (the main thread's signal loop). The gateway watches the files the config names
 * (consumers_file, the TLS certificates and keys) the same way, one watcher each.
 */
#ifndef SLUICE_GATEWAY_WATCH_H
#define SLUICE_GATEWAY_WATCH_H

struct gw_watch;

/* Starts watching `path`; NULL (with errno) when inotify is unavailable. */
struct gw_watch *gw_watch_start(const char *path);

/* Stops the watcher thread and frees it. */
void gw_watch_stop(struct gw_watch *watch);

#endif
