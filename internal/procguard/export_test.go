package procguard

// CloseOnExecProc is CloseOnExec's way on kernels without close_range.
var CloseOnExecProc = closeOnExecProc
