package scripts

// CheckSet is the scripts of Client.Check, kept apart from Set because a
// check is rare: they are built when a check runs.
type CheckSet struct {
	Queue       *Script // check_queue.lua
	Repair      *Script // check_repair.lua
	Registry    *Script // check_registry.lua
	Adopt       *Script // check_adopt.lua
	Unregister  *Script // check_unregister.lua
	Workflow    *Script // check_workflow.lua
	WfRepair    *Script // check_wf_repair.lua
	StepGone    *Script // check_step_gone.lua
	StepRequeue *Script // check_step_requeue.lua
	StepSwap    *Script // check_step_swap.lua
	StepForget  *Script // check_step_forget.lua
}

// LoadCheck builds the check scripts. Like Load it returns a fresh value,
// and sharded has the same meaning.
func LoadCheck(sharded bool) *CheckSet {
	load := loader(sharded, false)
	return &CheckSet{
		Queue:       load("check_queue.lua"),
		Repair:      load("check_repair.lua"),
		Registry:    load("check_registry.lua"),
		Adopt:       load("check_adopt.lua"),
		Unregister:  load("check_unregister.lua"),
		Workflow:    load("check_workflow.lua"),
		WfRepair:    load("check_wf_repair.lua"),
		StepGone:    load("check_step_gone.lua"),
		StepRequeue: load("check_step_requeue.lua"),
		StepSwap:    load("check_step_swap.lua"),
		StepForget:  load("check_step_forget.lua"),
	}
}
