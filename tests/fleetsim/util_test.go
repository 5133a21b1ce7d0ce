package fleetsim_test

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

type unstructuredT = unstructured.Unstructured

func unstructuredBool(u *unstructured.Unstructured, path ...string) (bool, bool, error) {
	return unstructured.NestedBool(u.Object, path...)
}

func unstructuredSlice(u *unstructured.Unstructured, path ...string) ([]any, bool, error) {
	return unstructured.NestedSlice(u.Object, path...)
}
