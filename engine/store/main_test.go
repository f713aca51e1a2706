package store_test

import (
	"testing"

	"github.com/attune-io/attune/appliance/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
