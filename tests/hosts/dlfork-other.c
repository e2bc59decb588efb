/* SPDX-License-Identifier: MIT */
/*
 * tests/hosts/dlfork-other.c - libhost-dlfork-other.so: a library host-dlfork's ctor modes
 * dlopen() and dlclose() in a loop on another thread, so that the agent rescans its modules.
 */
int host_dlfork_other_mark __attribute__((visibility("default"))) = 1;
