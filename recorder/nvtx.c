/* NVTX injection: with NVTX_INJECTION64_PATH pointing at libmemsnap.so
 * (memsnap run sets it), the NVTX library calls InitializeInjectionNvtx2 and
 * we put our functions into its callback tables.  Range push/pop and marks
 * become nvtx_push / nvtx_pop / nvtx_mark events with the message interned
 * (core_intern), so the timeline can shade "prefill", "decode", ...
 * Messages that are not ASCII (wide strings, registered strings) are
 * recorded as "(unicode message)" / "(registered string)".
 */
#define _GNU_SOURCE
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "recorder.h"

static MSNAP_TLS int t_depth;

static void nvtx_event(int action, const char *msg)
{
    if (!core_recording())
        return;
    t_in_hook++;
    {
        msnap_event e;
        memset(&e, 0, sizeof e);
        e.action = (uint16_t)action;
        e.api = MSNAP_API_NVTX;
        e.device = -1;
        e.aux = msg ? core_intern(msg) : 0;
        core_emit(&e, 0);
    }
    t_in_hook--;
}

static const char *attr_message(const nvtxEventAttributes_t *a)
{
    if (!a)
        return "";
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE: return "(unicode message)";
    case NVTX_MESSAGE_TYPE_REGISTERED: return "(registered string)";
    default: return "";
    }
}

static void NVTX_API mark_a(const char *m) { nvtx_event(MSNAP_A_NVTX_MARK, m); }
static void NVTX_API mark_ex(const nvtxEventAttributes_t *a)
{
    nvtx_event(MSNAP_A_NVTX_MARK, attr_message(a));
}
static int NVTX_API push_a(const char *m)
{
    nvtx_event(MSNAP_A_NVTX_PUSH, m);
    return t_depth++;
}
static int NVTX_API push_ex(const nvtxEventAttributes_t *a)
{
    nvtx_event(MSNAP_A_NVTX_PUSH, attr_message(a));
    return t_depth++;
}
static int NVTX_API pop(void)
{
    if (t_depth <= 0)
        return -1;
    nvtx_event(MSNAP_A_NVTX_POP, NULL);
    return --t_depth;
}
static void NVTX_API d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    mark_ex(a);
}
static int NVTX_API d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d;
    return push_ex(a);
}
static int NVTX_API d_pop(nvtxDomainHandle_t d)
{
    (void)d;
    return pop();
}

static void set_cb(NvtxFunctionTable t, unsigned int n, unsigned int id, NvtxFunctionPointer f)
{
    if (t && id < n && t[id])
        *t[id] = f;
}

MSNAP_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    if (!get || atomic_load(&g_state) < 0 || g_cfg.nvtx == NVTX_OFF)
        return 0;
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    if (!cb || !cb->GetModuleFunctionTable)
        return 0;
    NvtxFunctionTable t = NULL;
    unsigned int n = 0;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t) {
        set_cb(t, n, NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)mark_a);
        set_cb(t, n, NVTX_CBID_CORE_MarkEx, (NvtxFunctionPointer)mark_ex);
        set_cb(t, n, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)push_a);
        set_cb(t, n, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)push_ex);
        set_cb(t, n, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
    }
    t = NULL;
    n = 0;
    if (g_cfg.nvtx == NVTX_ALL && cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t) {
        set_cb(t, n, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)d_mark_ex);
        set_cb(t, n, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)d_push_ex);
        set_cb(t, n, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)d_pop);
    }
    return 1;
}
