/* dlsym, interposed (x86-64).
 *
 * glibc's dlsym finds "the caller" from its own return address: RTLD_NEXT
 * means "the next object after the one that called dlsym".  A C wrapper
 * would make libmemsnap.so the caller of every lookup and break RTLD_NEXT for
 * everybody else (a malloc interposer, say).  So dlsym is this trampoline:
 * it asks memsnap_dlsym_pre(handle, name, &result) whether the name is one we
 * hook; if not, it restores the arguments and JUMPS to glibc's dlsym, which
 * then sees the original return address.  memsnap_dlsym_pre has resolved
 * memsnap_real_dlsym (with dlvsym) before it returns.
 */
    .text
    .globl  dlsym
    .type   dlsym, @function
dlsym:
    .cfi_startproc
    pushq   %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq    %rsp, %rbp
    .cfi_def_cfa_register %rbp
    pushq   %rdi
    pushq   %rsi
    subq    $16, %rsp
    movq    %rsp, %rdx
    call    memsnap_dlsym_pre
    testl   %eax, %eax
    jnz     1f
    addq    $16, %rsp
    popq    %rsi
    popq    %rdi
    popq    %rbp
    .cfi_def_cfa %rsp, 8
    jmp     *memsnap_real_dlsym(%rip)
1:
    .cfi_def_cfa %rbp, 16
    movq    (%rsp), %rax
    addq    $16, %rsp
    popq    %rsi
    popq    %rdi
    popq    %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym
    .section .note.GNU-stack,"",@progbits
