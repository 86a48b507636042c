/*
 * al_plugin.h - attention variants loaded at run time from shared objects.
 *
 * A plugin exports one function, AL_PLUGIN_ENTRY (attnlab_variant.h), that
 * reports the interface version it was built for and returns a
 * NULL-terminated table of al_variant. The loader dlopens the file with
 * RTLD_NOW | RTLD_LOCAL (every kernel it calls must resolve at once, against
 * the program, which exports them), refuses another interface version with
 * both numbers in the message, and registers each variant with origin = the
 * plugin's path. A plugin loads whole or not at all, and stays loaded until
 * the process ends: the registry points into it.
 *
 * Order matters: model.attention.variant is looked up while a config is
 * decoded, so plugins are loaded first. Every command that reads an
 * experiment file goes through al_plugin_config_load (al_config_io.h;
 * al_cli_load_config does), or calls al_plugin_load_listed on its tree
 * before decoding it.
 */
#ifndef AL_PLUGIN_H
#define AL_PLUGIN_H

#include "al_config.h"
#include "al_yaml.h"

/* Load one plugin and register its variants. Loading a file that is
 * already loaded does nothing. Errors (one line, naming path): missing file,
 * not a shared object, an unresolved symbol, no entry point, another
 * interface version, a variant name already registered. */
int al_plugin_load(const char *path, al_err *e);

/* What al_plugin_load does once the file is open: call the entry point,
 * check the interface versions, and register every table it returns under
 * origin (kept, not copied: it must outlive the process's use of the
 * variants), whole or not at all. Exposed for the tests and the fuzzer,
 * which hand it tables built in memory. */
int al_plugin_register_entry(al_plugin_entry_fn entry, const char *origin, al_err *e);

/* Load the plugins a config tree lists under `plugins:`. A relative path is
 * taken relative to the directory of the file that lists it (the current
 * directory for --set). Each entry is rewritten to the absolute path that
 * was loaded, so the decoded config, written out, loads from anywhere.
 * Entries of the wrong type are left for al_config_decode to report.
 * Errors: "file:line:col: error: ...". */
int al_plugin_load_listed(al_node *root, al_err *e);

/* Record a plugin loaded from the command line in c->plugins (as an
 * absolute path, once), so a config written out names every plugin its
 * variant needs. */
int al_plugin_note(al_config *c, const char *path, al_err *e);

#endif
