# userns-off.pl PID1 — sets max_user_namespaces to 0 in the user namespace of PID1 (the sandbox's), so
# nothing inside can make a user namespace (ENOSPC) — and with one, mount a tmpfs of its own past the
# disk budget — while everything already inside keeps working. Joins the namespace without exec'ing (an
# exec as a uid that is not 0 inside would drop the capabilities the join gave), then writes through the
# host's /proc, whose /proc/sys/user shows the writer's own user namespace. Run by the keeper as the
# server's uid (root may join any namespace; a server that is not root owns its sandboxes'). The host
# prepends `my %SYS = (…);` (launch/perl-helpers.ts). No modules (see mount-root.pl).
my $pid = shift // '';
die "usage: PID1\n" unless $pid =~ /^\d+$/;
open(my $ns, '<', "/proc/$pid/ns/user") or die "sandbox-mcp: open userns: $!\n";
syscall($SYS{setns}, fileno($ns), 0x10000000) == 0 or die "sandbox-mcp: setns: $!\n";   # CLONE_NEWUSER
open(my $f, '>', '/proc/sys/user/max_user_namespaces') or die "sandbox-mcp: open: $!\n";
syswrite($f, "0\n") // die "sandbox-mcp: write: $!\n";
close($f) or die "sandbox-mcp: close: $!\n";
