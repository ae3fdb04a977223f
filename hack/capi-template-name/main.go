// capi-template-name names a new AWSMachineTemplate as the Machine Config Operator's Cluster API
// path does (MCO pull request #6082, capi_helpers.go newInfraTemplateName and
// capi_platform_helpers.go reconcileAWSCAPIMachineInfraTemplate): the template is read into CAPA's
// typed AWSMachineTemplate, written back to an unstructured map, and its whole `spec` is marshalled
// by encoding/json and hashed with FNV-1a 32.
//
// The project's Python computes the same name (bootimage_controller/core/capi/typed.py) from the
// typed shape this program prints; tests/core/capi/test_template_names.py checks the two agree.
//
//	capi-template-name name BASE < template.json   prints BASE-<8 hex digits>
//	capi-template-name shape                       prints the shape of AWSMachineTemplate's spec
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	capav1beta2 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "name" {
		fail(name(os.Args[2], os.Stdin))
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "shape" {
		fail(printShape())
		return
	}
	fmt.Fprintln(os.Stderr, "usage: capi-template-name name BASE < template.json | capi-template-name shape")
	os.Exit(2)
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// name follows the MCO's steps after it has set the new AMI: typed round trip, then the hash of spec.
func name(base string, in io.Reader) error {
	var obj map[string]interface{}
	if err := json.NewDecoder(in).Decode(&obj); err != nil {
		return err
	}
	tmpl := &capav1beta2.AWSMachineTemplate{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, tmpl); err != nil {
		return err
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		return err
	}
	spec, err := json.Marshal(out["spec"])
	if err != nil {
		return err
	}
	hasher := fnv.New32a()
	hasher.Write(spec)
	fmt.Printf("%s-%s\n", base, hex.EncodeToString(hasher.Sum(nil)))
	return nil
}

// A type as the unstructured converter sees it. Kind is one of string, bool, int, float, ptr, slice,
// map, struct, opaque (a type with its own JSON or unstructured form: its value is kept as given),
// or ref (Name names a struct in the table, so recursive types stay finite).
type shape struct {
	Kind   string  `json:"kind"`
	Name   string  `json:"name,omitempty"`
	Elem   *shape  `json:"elem,omitempty"`
	Fields []field `json:"fields,omitempty"`
}

type field struct {
	JSON      string `json:"json"` // "" for an inlined (embedded) struct
	OmitEmpty bool   `json:"omitempty,omitempty"`
	OmitZero  bool   `json:"omitzero,omitempty"`
	Type      *shape `json:"type"`
}

var (
	jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	toUnstr       = reflect.TypeOf((*interface{ ToUnstructured() interface{} })(nil)).Elem()
	isZeroer      = reflect.TypeOf((*interface{ IsZero() bool })(nil)).Elem()
)

func printShape() error {
	table := map[string]*shape{}
	root := describe(reflect.TypeOf(capav1beta2.AWSMachineTemplateSpec{}), table)
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	ordered := make([]map[string]interface{}, 0, len(names))
	for _, n := range names {
		ordered = append(ordered, map[string]interface{}{"name": n, "fields": table[n].Fields})
	}
	doc := map[string]interface{}{
		"module": "sigs.k8s.io/cluster-api-provider-aws/v2 " + moduleVersion(),
		"root":   root,
		"types":  ordered,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(doc)
}

func describe(t reflect.Type, table map[string]*shape) *shape {
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) ||
		t.Implements(toUnstr) || reflect.PointerTo(t).Implements(toUnstr) {
		return &shape{Kind: "opaque", Name: t.String()}
	}
	switch t.Kind() {
	case reflect.String:
		return &shape{Kind: "string"}
	case reflect.Bool:
		return &shape{Kind: "bool"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &shape{Kind: "int"}
	case reflect.Float32, reflect.Float64:
		return &shape{Kind: "float"}
	case reflect.Pointer:
		return &shape{Kind: "ptr", Elem: describe(t.Elem(), table)}
	case reflect.Slice:
		return &shape{Kind: "slice", Elem: describe(t.Elem(), table)}
	case reflect.Map:
		return &shape{Kind: "map", Elem: describe(t.Elem(), table)}
	case reflect.Interface:
		return &shape{Kind: "opaque", Name: t.String()}
	case reflect.Struct:
		if t.Implements(isZeroer) || reflect.PointerTo(t).Implements(isZeroer) {
			// omitzero would call the method: nothing in CAPA's spec has one; refuse rather than guess.
			panic("struct with an IsZero method: " + t.String())
		}
		n := t.PkgPath() + "." + t.Name()
		if _, seen := table[n]; !seen {
			s := &shape{Kind: "struct"}
			table[n] = s
			for i := 0; i < t.NumField(); i++ {
				s.Fields = append(s.Fields, describeField(t.Field(i), table))
			}
		}
		return &shape{Kind: "ref", Name: n}
	}
	panic("unsupported kind " + t.Kind().String() + " in " + t.String())
}

// describeField reads the json tag as apimachinery's fieldInfoFromField does.
func describeField(f reflect.StructField, table map[string]*shape) field {
	out := field{Type: describe(f.Type, table)}
	tag := f.Tag.Get("json")
	items := strings.Split(tag, ",")
	out.JSON = items[0]
	if out.JSON == "" && !f.Anonymous {
		out.JSON = f.Name
	}
	for _, item := range items[1:] {
		out.OmitEmpty = out.OmitEmpty || item == "omitempty"
		out.OmitZero = out.OmitZero || item == "omitzero"
	}
	return out
}
