package main

import (
	"fmt"
	"sort"
	"strings"
)

// A permission is one (apiGroup, resource, resourceName, verb) a rule grants;
// comparing sets of them compares what roles grant, however the rules are
// grouped. resourceName "*" means any.
type permission string

func perm(group, resource, name, verb string) permission {
	if name == "" {
		name = "*"
	}
	return permission(fmt.Sprintf("%s|%s|%s|%s", group, resource, name, verb))
}

func perms(group string, resources, names, verbs []string) []permission {
	var out []permission
	if len(names) == 0 {
		names = []string{"*"}
	}
	for _, r := range resources {
		for _, n := range names {
			for _, v := range verbs {
				out = append(out, perm(group, r, n, v))
			}
		}
	}
	return out
}

func rulePermissions(o Obj) ([]permission, error) {
	var out []permission
	for i, r := range list(o.M["rules"]) {
		rm := mapOf(r)
		if len(strList(rm["nonResourceURLs"])) > 0 {
			return nil, fmt.Errorf("%s rules[%d]: nonResourceURLs granted", o.Ref(), i)
		}
		groups, resources, names, verbs := strList(rm["apiGroups"]), strList(rm["resources"]), strList(rm["resourceNames"]), strList(rm["verbs"])
		for _, set := range [][]string{groups, resources, names, verbs} {
			for _, x := range set {
				if strings.Contains(x, "*") {
					return nil, fmt.Errorf("%s rules[%d]: wildcard %q", o.Ref(), i, x)
				}
			}
		}
		if len(groups) == 0 || len(resources) == 0 || len(verbs) == 0 {
			return nil, fmt.Errorf("%s rules[%d]: apiGroups, resources and verbs are required", o.Ref(), i)
		}
		for _, g := range groups {
			out = append(out, perms(g, resources, names, verbs)...)
		}
	}
	return out, nil
}

func sortedSet(ps []permission) []string {
	m := map[string]bool{}
	for _, p := range ps {
		m[string(p)] = true
	}
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func diffSets(got, want []string) error {
	g, w := map[string]bool{}, map[string]bool{}
	for _, x := range got {
		g[x] = true
	}
	for _, x := range want {
		w[x] = true
	}
	var extra, missing []string
	for _, x := range got {
		if !w[x] {
			extra = append(extra, x)
		}
	}
	for _, x := range want {
		if !g[x] {
			missing = append(missing, x)
		}
	}
	if len(extra)+len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("unexpected %v; missing %v", extra, missing)
}

// binding renders a RoleBinding/ClusterRoleBinding as "Kind ns/name ->
// RefKind/ref <- subjects" for exact comparison.
func binding(o Obj) string {
	ref := mapOf(o.M["roleRef"])
	var subjects []string
	for _, s := range list(o.M["subjects"]) {
		sm := mapOf(s)
		subjects = append(subjects, fmt.Sprintf("%s:%s/%s", str(sm["kind"]), str(sm["namespace"]), str(sm["name"])))
	}
	sort.Strings(subjects)
	return fmt.Sprintf("%s %s/%s -> %s/%s <- %s", o.Kind(), o.Namespace(), o.Name(),
		str(ref["kind"]), str(ref["name"]), strings.Join(subjects, ","))
}

// wantRBAC is what a value set must grant: exactly these roles (by
// "Kind ns/name") with exactly these permissions, and exactly these bindings.
type wantRBAC struct {
	roles    map[string][]permission
	bindings []string
}

func expectedRBAC(w *Want) wantRBAC {
	out := wantRBAC{roles: map[string][]permission{}}
	sa := fmt.Sprintf("ServiceAccount:%s/%s", w.Namespace, w.ServiceAccount)
	if w.RBAC {
		server := "ClusterRole /" + w.Fullname + "-server"
		out.roles[server] = append(perms("", []string{"pods", "nodes"}, nil, []string{"get", "list", "watch"}),
			perm("", "pods/binding", "", "create"))
		out.bindings = append(out.bindings,
			fmt.Sprintf("ClusterRoleBinding /%s-server -> ClusterRole/%s-server <- %s", w.Fullname, w.Fullname, sa))
		if w.Scheduler {
			le := fmt.Sprintf("Role %s/%s-leader-election", w.Namespace, w.Fullname)
			out.roles[le] = append(perms("coordination.k8s.io", []string{"leases"}, nil, []string{"create"}),
				perms("coordination.k8s.io", []string{"leases"}, []string{w.LeaseName}, []string{"get", "update"})...)
			// fitledger-server follows that one Lease (the leader fence).
			sl := fmt.Sprintf("Role %s/%s-server-lease", w.Namespace, w.Fullname)
			out.roles[sl] = perms("coordination.k8s.io", []string{"leases"}, []string{w.LeaseName}, []string{"get", "list", "watch"})
			out.bindings = append(out.bindings,
				fmt.Sprintf("ClusterRoleBinding /%s-kube-scheduler -> ClusterRole/system:kube-scheduler <- %s", w.Fullname, sa),
				fmt.Sprintf("ClusterRoleBinding /%s-volume-scheduler -> ClusterRole/system:volume-scheduler <- %s", w.Fullname, sa),
				fmt.Sprintf("RoleBinding kube-system/%s-extension-apiserver-authentication-reader -> Role/extension-apiserver-authentication-reader <- %s", w.Fullname, sa),
				fmt.Sprintf("RoleBinding %s/%s-leader-election -> Role/%s-leader-election <- %s", w.Namespace, w.Fullname, w.Fullname, sa),
				fmt.Sprintf("RoleBinding %s/%s-server-lease -> Role/%s-server-lease <- %s", w.Namespace, w.Fullname, w.Fullname, sa),
			)
		}
	}
	if w.Test {
		test := fmt.Sprintf("Role %s/%s-test", w.Namespace, w.Fullname)
		out.roles[test] = append(append(
			perms("apps", []string{"deployments"}, []string{w.Fullname}, []string{"get"}),
			perms("", []string{"pods"}, nil, []string{"get", "list"})...),
			perms("", []string{"pods/portforward"}, nil, []string{"get", "create"})...)
		out.bindings = append(out.bindings,
			fmt.Sprintf("RoleBinding %s/%s-test -> Role/%s-test <- ServiceAccount:%s/%s-test", w.Namespace, w.Fullname, w.Fullname, w.Namespace, w.Fullname))
	}
	return out
}

// checkRBAC compares every Role, ClusterRole and binding of the render with
// the expectation, both ways.
func checkRBAC(objs []Obj, w *Want) error {
	want := expectedRBAC(w)
	var gotRoles, wantRoles []string
	for _, o := range objs {
		if o.Kind() != "Role" && o.Kind() != "ClusterRole" {
			continue
		}
		ref := o.Ref()
		gotRoles = append(gotRoles, ref)
		ps, err := rulePermissions(o)
		if err != nil {
			return err
		}
		exp, ok := want.roles[ref]
		if !ok {
			continue
		}
		if err := diffSets(sortedSet(ps), sortedSet(exp)); err != nil {
			return fmt.Errorf("%s grants: %v", ref, err)
		}
	}
	for ref := range want.roles {
		wantRoles = append(wantRoles, ref)
	}
	if err := diffSets(gotRoles, wantRoles); err != nil {
		return fmt.Errorf("roles: %v", err)
	}
	var gotBindings []string
	for _, o := range objs {
		if o.Kind() == "RoleBinding" || o.Kind() == "ClusterRoleBinding" {
			if str(get(o.M, "roleRef", "apiGroup")) != "rbac.authorization.k8s.io" {
				return fmt.Errorf("%s: roleRef.apiGroup must be rbac.authorization.k8s.io", o.Ref())
			}
			gotBindings = append(gotBindings, binding(o))
		}
	}
	if err := diffSets(gotBindings, want.bindings); err != nil {
		return fmt.Errorf("bindings: %v", err)
	}
	return nil
}
