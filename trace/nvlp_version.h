/* nvlp_version.h: the nvlprof release version, shared by the CLI (--version) and the shim's header. */
#ifndef NVLP_VERSION_H
#define NVLP_VERSION_H
#define NVLP_VERSION "0.1.0"
#endif
