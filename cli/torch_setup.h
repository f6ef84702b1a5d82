/* The recorder's PyTorch plugin built where it is needed (cmd_torch_setup.c).
 *
 * `memsnap torch-setup` builds it on request; `memsnap run` builds it at the
 * first run of a Python program whose PyTorch has none yet, so that nobody
 * needs a setup step.  Both run the same build (torch/build_plugin.py, carried
 * inside the memsnap binary) into the same cache folder, where the recorder
 * looks (recorder/torch.c). */
#ifndef MEMSNAP_CLI_TORCH_SETUP_H
#define MEMSNAP_CLI_TORCH_SETUP_H

/* Before `memsnap run` starts cmd (a NULL-terminated argv): when cmd is a
 * Python program (a python interpreter, a script whose #! line names one, or
 * a command with a python word among its arguments, such as `env X=1
 * python3`), finds the PyTorch that interpreter would import, without
 * running Python: torch/lib/libc10_cuda.so in its PYTHONPATH, user,
 * virtual-environment and prefix site folders.  When that PyTorch has no
 * plugin yet ($MEMSNAP_TORCH_PLUGIN_DIR, the folder of recorder, the cache),
 * its C++ headers, the CUDA runtime headers and a C++ compiler are there,
 * and no earlier build for it failed, builds the plugin into the cache
 * (${XDG_CACHE_HOME:-$HOME/.cache}/memsnap/torch) with one line on stderr,
 * holding a lock so that concurrent runs build it once.  A failed build
 * leaves its log as libmemsnap_torch-<build-id>.failed there (one line
 * says so) and is not tried again by `memsnap run`.
 *
 * Otherwise it does nothing and says nothing: without a plugin the
 * recorder prints its one-line notice if the program loads PyTorch.  It
 * never stops the run.  Cost when nothing is built: a PATH lookup, one
 * 512-byte read of the command and a few stat calls. */
void torch_autobuild(char *const *cmd, const char *recorder);

#endif
